package throughput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// The znodes of a throughput group, under <root>/throughput/<group>:
//
//	<group>                                   persistent; data {"limit": N}
//	<group>/members/_c_<guid>-member-<seq>    ephemeral sequential; data {"id","weight","demand"}
//	<group>/allocation                        persistent; data allocationData

// groupData is the data of the group node.
type groupData struct {
	Limit int64 `json:"limit"`
}

// memberData is the data of a member node. Demand nil is unlimited.
type memberData struct {
	ID     string `json:"id"`
	Weight int64  `json:"weight"`
	Demand *int64 `json:"demand,omitempty"`
}

// allocationData is the data of the allocation node: one whole allocation, so
// that a reader never sees a torn one.
type allocationData struct {
	// Version increases by one with every allocation written (compare-and-set on
	// the node's version makes it so).
	Version int64 `json:"version"`
	// Leader is the computing member's id ("" for the allocation of a group
	// without members), LeaderNode its node's name.
	Leader     string `json:"leader,omitempty"`
	LeaderNode string `json:"leaderNode,omitempty"`
	// Term is the czxid of the leader's member node: the highest term that ever
	// wrote. An allocation is never written over one of a higher term.
	Term    int64             `json:"leaderTerm"`
	Limit   int64             `json:"limit"`
	Members []allocatedMember `json:"members"`
}

type allocatedMember struct {
	Node   string `json:"node"`
	ID     string `json:"id"`
	Weight int64  `json:"weight"`
	Demand *int64 `json:"demand,omitempty"`
	Share  int64  `json:"share"`
}

// member is a live member node as read.
type member struct {
	node  string
	data  memberData
	czxid int64
	owner int64 // ephemeral owner: the session that made it
}

func demandOf(d *int64) int64 {
	if d == nil {
		return -1
	}
	return *d
}

func sameDemand(a, b *int64) bool { return demandOf(a) == demandOf(b) }

func decodeGroup(data []byte) int64 {
	var g groupData
	if json.Unmarshal(data, &g) != nil || g.Limit < 0 {
		return 0
	}
	return g.Limit
}

// decodeMember reads a member node's data; a node that is not ours (foreign or
// corrupt) counts as a member of weight 1 named after its node.
func decodeMember(node string, data []byte) memberData {
	var m memberData
	if json.Unmarshal(data, &m) != nil || m.ID == "" {
		return memberData{ID: node, Weight: 1}
	}
	m.Weight = min(max(m.Weight, 1), MaxWeight)
	if m.Demand != nil && *m.Demand < 0 {
		m.Demand = nil
	}
	return m
}

func decodeAllocation(data []byte) (*allocationData, error) {
	var a allocationData
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("allocation: %w", err)
	}
	return &a, nil
}

// compute is the allocation the leader (line[0]) publishes for these members
// in join order, before its version is set.
func compute(limit int64, line []member) *allocationData {
	a := &allocationData{Limit: limit, Members: make([]allocatedMember, len(line))}
	wants := make([]Want, len(line))
	for i, m := range line {
		wants[i] = Want{Weight: m.data.Weight, Demand: demandOf(m.data.Demand)}
	}
	shares := Allocate(limit, wants)
	for i, m := range line {
		a.Members[i] = allocatedMember{Node: m.node, ID: m.data.ID, Weight: m.data.Weight, Demand: m.data.Demand, Share: shares[i]}
	}
	if len(line) > 0 {
		a.Leader, a.LeaderNode, a.Term = line[0].data.ID, line[0].node, line[0].czxid
	}
	return a
}

// sameAllocation compares everything but the version.
func sameAllocation(a, b *allocationData) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Leader != b.Leader || a.LeaderNode != b.LeaderNode || a.Limit != b.Limit || len(a.Members) != len(b.Members) {
		return false
	}
	for i := range a.Members {
		x, y := a.Members[i], b.Members[i]
		if x.Node != y.Node || x.ID != y.ID || x.Weight != y.Weight || x.Share != y.Share || !sameDemand(x.Demand, y.Demand) {
			return false
		}
	}
	return true
}

// writeAllocation publishes next over the allocation node, whose current content
// is prev at node version ver (prev nil: the node does not exist). next.Version
// becomes prev.Version+1. With a leader node, the write is one transaction that
// also checks that the leader's member node still exists, so a member that
// stopped leading (its node is gone) can never write; the compare-and-set on
// ver makes every concurrent writer but one fail (zookeeper.ErrBadVersion,
// ErrNodeExists, ErrNoNode), and the one that lost reads again. It returns the
// node's new version.
func writeAllocation(ctx context.Context, ep *zookeeper.Epoch, allocPath string, prev *allocationData, ver int32, next *allocationData) (int32, error) {
	if prev != nil {
		if next.Term < prev.Term {
			if next.LeaderNode != "" {
				return 0, fmt.Errorf("term %d below %d: %w", next.Term, prev.Term, errStaleTerm)
			}
			next.Term = prev.Term // an empty group keeps the highest term seen
		}
		next.Version = prev.Version + 1
	} else {
		next.Version = 1
	}
	data, err := json.Marshal(next)
	if err != nil {
		return 0, err
	}
	var ops []zookeeper.Op
	if next.LeaderNode != "" {
		ops = append(ops, zookeeper.CheckOp{Path: path.Dir(allocPath) + "/members/" + next.LeaderNode, Version: -1})
	}
	if prev != nil {
		ops = append(ops, zookeeper.SetOp{Path: allocPath, Data: data, Version: ver})
	} else {
		ops = append(ops, zookeeper.CreateOp{Path: allocPath, Data: data, Mode: zookeeper.Persistent})
	}
	res, err := ep.Multi(ctx, ops...)
	if err != nil || prev == nil {
		return 0, err
	}
	if st := res[len(res)-1].Stat; st != nil {
		return st.Version, nil
	}
	return ver + 1, nil
}

// snapshot is a group as read at one moment: the allocation and the live members.
type snapshot struct {
	exists   bool // the group node exists
	limit    int64
	line     []member // live members in join order
	alloc    *allocationData
	allocVer int32
}

// inspect reads a group once, without watches: group, members and allocation
// together, then the ids of the members the allocation does not name yet
// (pipelined; a member's id never changes). The members it returns carry their
// node and id only.
func (t *Throughputs) inspect(ctx context.Context, ep *zookeeper.Epoch, group string) (*snapshot, error) {
	gp := t.groupPath(group)
	snap := &snapshot{}
	var names []string
	var allocRaw []byte
	var allocStat *zookeeper.Stat
	err := zookeeper.Parallel(
		func() error {
			data, _, err := ep.Get(ctx, gp)
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil
			}
			snap.exists, snap.limit = err == nil, decodeGroup(data)
			return err
		},
		func() error {
			var err error
			names, _, err = ep.Children(ctx, gp+"/members")
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil
			}
			return err
		},
		func() error {
			var err error
			allocRaw, allocStat, err = ep.Get(ctx, gp+"/allocation")
			if errors.Is(err, zookeeper.ErrNoNode) {
				allocRaw, allocStat = nil, nil
				return nil
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("throughput group %q: %w", group, err)
	}
	known := map[string]string{}
	if allocStat != nil {
		if a, err := decodeAllocation(allocRaw); err == nil {
			snap.alloc, snap.allocVer = a, allocStat.Version
			for _, m := range a.Members {
				known[m.Node] = m.ID
			}
		} else {
			snap.alloc, snap.allocVer = &allocationData{}, allocStat.Version
		}
	}
	line, err := readLine(ctx, ep, gp+"/members", zookeeper.SortBySeq(names), known)
	if err != nil {
		return nil, fmt.Errorf("throughput group %q: %w", group, err)
	}
	snap.line = line
	return snap, nil
}

// readLine returns the members among nodes (in that order) that still exist,
// taking the id of those in known from it and reading the others' data
// (pipelined).
func readLine(ctx context.Context, ep *zookeeper.Epoch, mp string, nodes []string, known map[string]string) ([]member, error) {
	members := make([]member, len(nodes))
	gone := make([]bool, len(nodes))
	var fns []func() error
	for i, n := range nodes {
		if id, ok := known[n]; ok {
			members[i] = member{node: n, data: memberData{ID: id}}
			continue
		}
		fns = append(fns, func() error {
			data, _, err := ep.Get(ctx, mp+"/"+n)
			if errors.Is(err, zookeeper.ErrNoNode) {
				gone[i] = true
				return nil
			}
			if err == nil {
				members[i] = member{node: n, data: decodeMember(n, data)}
			}
			return err
		})
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return nil, err
	}
	var line []member
	for i, m := range members {
		if !gone[i] {
			line = append(line, m)
		}
	}
	return line, nil
}
