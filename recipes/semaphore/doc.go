// Package semaphore keeps counting semaphores in ZooKeeper, in the layout and
// with the algorithm of Curator's InterProcessSemaphoreV2 (see Semaphores): an
// internal mutex waited in through recipes/line, and one lease node per permit
// held. It knows ZooKeeper through internal/zookeeper and leases through
// recipes/kit, and nothing of HTTP. A permit belongs to the session under which
// it was granted, as every grant does (see recipes/lock).
package semaphore
