package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Kind is the kind of a leased key among a lease's holds.
const Kind = "kv"

// DefaultContentType is the type of a value written without one, or by a client
// that keeps no type (Curator, kazoo).
const DefaultContentType = "application/octet-stream"

// Absent is the version of a key that has no value: a write with it as the
// expected version creates the key only if it is absent.
const Absent int32 = -1

// Store is the keys of one sidecar (see the package doc for the layout).
type Store struct {
	s       *zookeeper.Session
	dir     string
	metaDir string
	metrics metrics

	followers *kit.Followers[*Value]

	mu sync.Mutex
	// leased is the holding of every key a lease of this sidecar wrote: there is
	// one node per key, so at most one.
	leased map[string]*leasedKey
}

// Value is a key's value and version as one read saw it.
type Value struct {
	Key string
	// Exists is false when the key has no value (Version is then Absent).
	Exists      bool
	Data        []byte
	ContentType string
	Version     int32
	// Mzxid is the zxid of the write that made this value (0 when absent).
	Mzxid int64
	// Ephemeral is set for a key that ends with a lease (or a session).
	Ephemeral bool
	// Unknown is set by a follower before its first read succeeded.
	Unknown bool
}

// New returns the key store over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Store {
	k := &Store{s: s, dir: s.Dir("kv"), metaDir: s.Dir("kv-meta"),
		metrics: newMetrics(reg), leased: map[string]*leasedKey{}}
	k.followers = kit.NewFollowers(s, k.metrics.followed, func(key string) kit.Source[*Value] {
		return &source{k: k, key: key}
	})
	return k
}

// node is key's node: a key with "/" is nested nodes, kv/config/app/db.
func (k *Store) node(key string) string { return k.dir + "/" + key }
func (k *Store) meta(key string) string { return k.metaDir + "/" + key }

// Put writes data as key's value with its content type and returns the new
// version. version nil writes whatever the current version; Absent writes only
// if the key is absent; another version only if it is the current one. A refused
// compare-and-set is a *VersionMismatchError with the current version.
//
// With a lease the key is ephemeral and is deleted when the lease ends: a key
// the lease does not hold yet is created (it must be absent: a key that exists
// and is not the lease's answers a *VersionMismatchError with its version); a
// key it holds is written in place.
func (k *Store) Put(ctx context.Context, key string, data []byte, contentType string, version *int32, lease *kit.Lease) (int32, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	if version != nil && *version < Absent {
		return 0, fmt.Errorf("version %d: %w", *version, kit.ErrInvalidArgument)
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if lease != nil {
		return k.putLeased(ctx, lease, key, data, contentType, version)
	}
	ep, err := k.s.Await(ctx)
	if err != nil {
		return 0, err
	}
	if err := k.ensureDirs(ctx, ep, contentType); err != nil {
		return 0, err
	}
	if version != nil {
		v, err := k.write(ctx, ep, key, data, contentType, *version == Absent, zookeeper.Persistent, *version)
		return v, k.refused(ctx, ep, key, err)
	}
	// Any version: set, or create when absent, whichever the key needs meanwhile.
	create := false
	for {
		v, err := k.write(ctx, ep, key, data, contentType, create, zookeeper.Persistent, -1)
		switch {
		case !create && errors.Is(err, zookeeper.ErrNoNode), create && errors.Is(err, zookeeper.ErrNodeExists):
			create = !create
			continue
		case err == nil:
			k.metrics.writes.WithLabelValues("written").Inc()
		}
		return v, err
	}
}

// refused turns a refused compare-and-set into a *VersionMismatchError with the
// key's current version.
func (k *Store) refused(ctx context.Context, ep *zookeeper.Epoch, key string, err error) error {
	if !errors.Is(err, zookeeper.ErrBadVersion) && !errors.Is(err, zookeeper.ErrNodeExists) && !errors.Is(err, zookeeper.ErrNoNode) {
		if err == nil {
			k.metrics.writes.WithLabelValues("written").Inc()
		}
		return err
	}
	k.metrics.writes.WithLabelValues("version-mismatch").Inc()
	cur, err := k.version(ctx, ep, key)
	if err != nil {
		return err
	}
	return &VersionMismatchError{Key: key, Version: cur}
}

// version reads key's current version (Absent when it has no value).
func (k *Store) version(ctx context.Context, ep *zookeeper.Epoch, key string) (int32, error) {
	ok, st, err := ep.Exists(ctx, k.node(key))
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return Absent, nil
	}
	return st.Version, nil
}

func (k *Store) ensureDirs(ctx context.Context, ep *zookeeper.Epoch, contentType string) error {
	if err := ep.EnsurePersistent(ctx, k.dir); err != nil {
		return err
	}
	if contentType == DefaultContentType {
		return nil
	}
	return ep.EnsurePersistent(ctx, k.metaDir)
}

// write applies the value's write (a create with mode, or a set at version) and,
// for a content type other than the default, the meta node's in the same
// transaction, so that both carry one mzxid. It returns the new version, or the
// value op's error (ErrNoNode, ErrNodeExists, ErrBadVersion, ...).
func (k *Store) write(ctx context.Context, ep *zookeeper.Epoch, key string, data []byte, contentType string, create bool, mode, version int32) (int32, error) {
	var valueOp zookeeper.Op = zookeeper.SetOp{Path: k.node(key), Data: data, Version: version}
	if create {
		valueOp = zookeeper.CreateOp{Path: k.node(key), Data: data, Mode: mode}
	}
	ops := []zookeeper.Op{valueOp}
	metaMode := zookeeper.Persistent
	if create && mode == zookeeper.Ephemeral {
		metaMode = zookeeper.Ephemeral // the type goes with the key
	}
	setMeta := true
	for attempt := 0; ; attempt++ {
		if contentType != DefaultContentType {
			var metaOp zookeeper.Op = zookeeper.SetOp{Path: k.meta(key), Data: []byte(contentType), Version: -1}
			if !setMeta {
				metaOp = zookeeper.CreateOp{Path: k.meta(key), Data: []byte(contentType), Mode: metaMode}
			}
			ops = []zookeeper.Op{valueOp, metaOp}
		}
		res, err := ep.MultiChecked(ctx, ops...) // a lost answer is checked
		if err == nil {
			if create {
				return 0, nil
			}
			return res[0].Stat.Version, nil
		}
		if len(res) != len(ops) {
			return 0, err // no answer: the write may or may not have been applied
		}
		if attempt >= 4 {
			return 0, refusal(key, res)
		}
		if setMeta, err = k.repair(ctx, ep, key, create, setMeta, res); err != nil {
			return 0, err
		}
	}
}

// repair readies the next attempt of a write that res refused: the value's
// missing parents made (a create of a nested key), or the meta node's; the
// meta op switched between set and create as its node turned out absent or
// present. Anything else is the refusal (see refusal).
func (k *Store) repair(ctx context.Context, ep *zookeeper.Epoch, key string, create, setMeta bool, res []zookeeper.OpResult) (bool, error) {
	switch {
	case res[0].Err != nil && create && errors.Is(res[0].Err, zookeeper.ErrNoNode) && strings.Contains(key, "/"):
		return setMeta, k.makeParents(ctx, ep, k.dir, key)
	case res[0].Err != nil:
		return setMeta, refusal(key, res)
	// The value was fine; the meta node was not as expected: the other op.
	case !setMeta && errors.Is(res[1].Err, zookeeper.ErrNoNode):
		return setMeta, k.makeParents(ctx, ep, k.metaDir, key) // the meta node's parents
	case errors.Is(res[1].Err, zookeeper.ErrNoNode):
		return false, nil
	case errors.Is(res[1].Err, zookeeper.ErrNodeExists):
		return true, nil
	}
	return setMeta, refusal(key, res)
}

// refusal is the error of a refused write: the value op's (a key under a
// leased key: ErrLeasedParent), else the meta op's.
func refusal(key string, res []zookeeper.OpResult) error {
	switch {
	case errors.Is(res[0].Err, zookeeper.ErrNoChildrenForEphemerals):
		return fmt.Errorf("key %q: %w", key, ErrLeasedParent)
	case res[0].Err != nil:
		return res[0].Err
	}
	return res[1].Err
}

// Get reads key's value, its version and its content type. ErrKeyNotFound when
// it has none.
func (k *Store) Get(ctx context.Context, key string) (*Value, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	ep, err := k.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	// The value and its type are read together first (one round trip). When
	// their zxids differ, either a write came between the two reads or the
	// value was written without a type (by another client); to tell which, they
	// are read again one after the other, value first: then a type newer than
	// the value means a write came between (read again), and an older one
	// belongs to an earlier value.
	for attempt := 0; ; attempt++ {
		var data, meta []byte
		var st, mst *zookeeper.Stat
		var merr error
		readValue := func() (err error) {
			data, st, err = ep.Get(ctx, k.node(key))
			return err
		}
		readMeta := func() error {
			meta, mst, merr = ep.Get(ctx, k.meta(key))
			return nil
		}
		var err error
		if attempt == 0 {
			err = zookeeper.Parallel(readValue, readMeta)
		} else if err = readValue(); err == nil {
			_ = readMeta()
		}
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil, fmt.Errorf("key %q: %w", key, ErrKeyNotFound)
		}
		if err != nil {
			return nil, err
		}
		if merr != nil && !errors.Is(merr, zookeeper.ErrNoNode) {
			return nil, merr
		}
		switch {
		case merr != nil, mst.Mzxid == st.Mzxid:
		case attempt == 0, mst.Mzxid > st.Mzxid && attempt < maxTypeReads:
			continue
		}
		return k.value(key, data, st, meta, mst), nil
	}
}

// maxTypeReads bounds Get's reads of a value whose type keeps changing under
// it; the last one shows the value without its type.
const maxTypeReads = 10

// value is what a read of the value node and its meta node (mst nil: none) shows.
func (k *Store) value(key string, data []byte, st *zookeeper.Stat, meta []byte, mst *zookeeper.Stat) *Value {
	v := &Value{Key: key, Exists: true, Data: data, ContentType: DefaultContentType, Version: st.Version,
		Mzxid: st.Mzxid, Ephemeral: st.EphemeralOwner != 0}
	if mst != nil && mst.Mzxid == st.Mzxid && len(meta) > 0 {
		v.ContentType = string(meta)
	}
	if v.Data == nil {
		v.Data = []byte{}
	}
	return v
}

// Info is a key as a list shows it.
type Info struct {
	Key     string
	Version int32
	Size    int32
}

// Stat reads key's version and size. ErrKeyNotFound when it has no value.
func (k *Store) Stat(ctx context.Context, key string) (*Info, error) {
	ep, err := k.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	ok, st, err := ep.Exists(ctx, k.node(key))
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("key %q: %w", key, ErrKeyNotFound)
	}
	return &Info{Key: key, Version: st.Version, Size: st.DataLength}, nil
}

// List returns the keys that have a value, sorted.
func (k *Store) List(ctx context.Context) ([]string, error) { return kit.ListNames(ctx, k.s, k.dir) }

// Delete deletes key's value (and its type), if its version is *version when
// version is not nil. ErrKeyNotFound when it has none; a *VersionMismatchError
// when the version differs; ErrHasChildren when keys lie under it (see
// DeleteTree). A leased key deleted here is no longer its lease's:
// the lease's stream is told (lost-hold).
func (k *Store) Delete(ctx context.Context, key string, version *int32) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	v := int32(-1)
	if version != nil {
		if *version < 0 {
			return fmt.Errorf("version %d: a delete names a version of 0 or more: %w", *version, kit.ErrInvalidArgument)
		}
		v = *version
	}
	ep, err := k.s.Await(ctx)
	if err != nil {
		return err
	}
	err = k.remove(ctx, ep, key, v)
	switch {
	case errors.Is(err, zookeeper.ErrNoNode):
		return fmt.Errorf("key %q: %w", key, ErrKeyNotFound)
	case errors.Is(err, zookeeper.ErrNotEmpty):
		return fmt.Errorf("key %q: %w", key, ErrHasChildren)
	case errors.Is(err, zookeeper.ErrBadVersion):
		return k.refused(ctx, ep, key, err)
	case err != nil:
		return err
	}
	k.metrics.writes.WithLabelValues("deleted").Inc()
	k.deletedFor(key)
	return nil
}

// remove deletes the value node at version and its meta node in one
// transaction (the value alone when there is no meta node).
func (k *Store) remove(ctx context.Context, ep *zookeeper.Epoch, key string, version int32) error {
	res, err := ep.MultiChecked(ctx, zookeeper.DeleteOp{Path: k.node(key), Version: version}, zookeeper.DeleteOp{Path: k.meta(key), Version: -1})
	switch {
	case err == nil:
		return nil
	case len(res) != 2:
		return err
	case res[0].Err != nil:
		return res[0].Err
	case errors.Is(res[1].Err, zookeeper.ErrNoNode), errors.Is(res[1].Err, zookeeper.ErrNotEmpty):
		// No type, or only the types of keys under it (left by keys deleted
		// by another client): the value alone.
		return ep.DeleteChecked(ctx, k.node(key), version)
	}
	return res[1].Err
}

// Follow follows key: however many followers a key has on this sidecar, one
// watch serves them all. Close the follower when done.
func (k *Store) Follow(key string) (*kit.Follower[*Value], error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	return k.followers.Follow(key), nil
}

// source reads one key for its follower.
type source struct {
	k   *Store
	key string
}

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*Value, error) {
	data, st, ok, err := kit.ReadNode(ctx, ep, w, "value", s.k.node(s.key))
	if err != nil {
		return nil, err
	}
	if !ok {
		return &Value{Key: s.key, Version: Absent}, nil
	}
	// The type changes only with the value, whose watch covers both.
	meta, mst, err := ep.Get(ctx, s.k.meta(s.key))
	if errors.Is(err, zookeeper.ErrNoNode) {
		meta, mst, err = nil, nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.k.value(s.key, data, st, meta, mst), nil
}

func (s *source) Reset() {}

// Uncertain keeps the last value: a value is data, not ownership, and the
// follower reads it again as soon as the session is back.
func (s *source) Uncertain(last *Value, loaded bool, _ kit.Uncertainty) *Value {
	if loaded {
		return last
	}
	return &Value{Key: s.key, Version: Absent, Unknown: true}
}

func (s *source) Same(a, b *Value) bool {
	return a.Unknown == b.Unknown && a.Exists == b.Exists && a.Mzxid == b.Mzxid && a.Version == b.Version &&
		a.ContentType == b.ContentType
}

type metrics struct {
	followed prometheus.Gauge
	leased   prometheus.Gauge
	writes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	f := promauto.With(reg)
	return metrics{
		followed: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_kv_followed_keys", Help: "Keys this sidecar follows (one ZooKeeper watch each, whatever the number of subscribers).",
		}),
		leased: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_kv_leased_keys", Help: "Keys held by leases of this sidecar (ephemeral).",
		}),
		writes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_kv_writes_total", Help: "Key writes and deletes, by result (written, deleted, version-mismatch).",
		}, []string{"result"}),
	}
}
