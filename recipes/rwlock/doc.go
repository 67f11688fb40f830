// Package rwlock keeps fair read/write locks in ZooKeeper, in the layout of
// Curator's InterProcessReadWriteLock (see RWLocks): one line of reader and
// writer nodes per lock, waited in through recipes/line; a writer's holder and
// the not-granted error (lock.ErrLocked) are the lock's. It knows ZooKeeper
// through internal/zookeeper and leases through recipes/kit, and nothing of
// HTTP. A grant belongs to the session under which it was made, as every grant
// does (see recipes/lock).
package rwlock
