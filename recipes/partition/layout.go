package partition

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// The znodes of a partition group, under <root>/partitions/<group>:
//
//	<group>                      persistent; data setData: the partition set
//	<group>/members/<id>         ephemeral (parent a container); data memberData
//	<group>/plan                 persistent; data planData, written by the leader only
//	<group>/owners/<partition>   ephemeral (parent a container); data ownerData: the
//	                             member that owns the partition; its czxid is the
//	                             owner's fencing token
//
// Versions are zxids, so every sidecar computes the same ones without writing
// anything: a member's version is the highest of the plan's last change, its
// own node's last change (an ack writes it) and the creation of the owner nodes
// it holds; the group's version is the highest zxid among all of these.

// MaxPartitions bounds a partition set.
const MaxPartitions = 10000

// MaxWeight bounds a member's weight.
const MaxWeight = 1000

// maxSetBytes bounds the set's encoding (one znode's data, under jute.maxbuffer).
const maxSetBytes = 512 << 10

// Set is a partition set: Count partitions named "0".."Count-1", or Names.
type Set struct {
	Count int      `json:"count,omitempty"`
	Names []string `json:"partitions,omitempty"`
}

// CheckSet checks a set: a count in 1..MaxPartitions, or 1..MaxPartitions
// unique valid names; not both.
func CheckSet(s Set) error {
	switch {
	case s.Names == nil && (s.Count < 1 || s.Count > MaxPartitions):
		return fmt.Errorf("count %d not in 1..%d: %w", s.Count, MaxPartitions, kit.ErrInvalidArgument)
	case s.Names != nil && s.Count != 0:
		return fmt.Errorf("give count or partitions, not both: %w", kit.ErrInvalidArgument)
	case s.Names != nil && (len(s.Names) < 1 || len(s.Names) > MaxPartitions):
		return fmt.Errorf("%d partitions not in 1..%d: %w", len(s.Names), MaxPartitions, kit.ErrInvalidArgument)
	}
	seen := make(map[string]bool, len(s.Names))
	size := 0
	for _, n := range s.Names {
		if err := kit.CheckName("partition", n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("partition %q given twice: %w", n, kit.ErrInvalidArgument)
		}
		seen[n] = true
		size += len(n) + 3
	}
	if size > maxSetBytes {
		return fmt.Errorf("the partition names take %d bytes, above %d: %w", size, maxSetBytes, kit.ErrInvalidArgument)
	}
	return nil
}

// List is the set's partition names in order.
func (s Set) List() []string {
	if s.Names != nil {
		return s.Names
	}
	out := make([]string, s.Count)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

func decodeSet(data []byte) Set {
	var s Set
	if json.Unmarshal(data, &s) != nil || CheckSet(s) != nil {
		return Set{}
	}
	return s
}

type memberData struct {
	Weight int64 `json:"weight"`
	// Acked is the last version the member acked.
	Acked int64 `json:"acked,omitempty"`
}

func decodeMember(data []byte) memberData {
	var m memberData
	_ = json.Unmarshal(data, &m)
	m.Weight = min(max(m.Weight, 1), MaxWeight)
	return m
}

// planData is the plan node's data: one whole plan, so no reader sees a torn one.
type planData struct {
	// Leader is the id of the member that wrote it; Term its node's czxid. A plan
	// is never written over one of a higher term.
	Leader string `json:"leader,omitempty"`
	Term   int64  `json:"term"`
	// Partitions are the set's names in order; Members the member ids in join
	// order with their weights; Owner[i] the index in Members of partition i's
	// member (-1: none).
	Partitions []string   `json:"partitions"`
	Members    []Weighted `json:"members"`
	Owner      []int      `json:"owner"`
}

type ownerData struct {
	Member string `json:"member"`
	// Incarnation is the czxid of the member node that owns it: a member that
	// left and joined again under the same id does not own its old nodes.
	Incarnation int64 `json:"incarnation"`
}

func decodeOwner(data []byte) ownerData {
	var o ownerData
	_ = json.Unmarshal(data, &o)
	return o
}

// assignment returns the plan as partition → member id.
func (p *planData) assignment() map[string]string {
	out := make(map[string]string, len(p.Partitions))
	for i, name := range p.Partitions {
		if i < len(p.Owner) && p.Owner[i] >= 0 && p.Owner[i] < len(p.Members) {
			out[name] = p.Members[p.Owner[i]].ID
		}
	}
	return out
}

// computePlan is the plan the leader publishes for these members (join order)
// over set, starting from prev.
func computePlan(set []string, members []Weighted, prev *planData) *planData {
	var before map[string]string
	if prev != nil {
		before = prev.assignment()
	}
	prevIDs := make([]string, len(set))
	for i, name := range set {
		prevIDs[i] = before[name]
	}
	ids := Plan(len(set), members, prevIDs)
	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m.ID] = i
	}
	p := &planData{Partitions: set, Members: members, Owner: make([]int, len(set))}
	for i, id := range ids {
		if j, ok := index[id]; ok {
			p.Owner[i] = j
		} else {
			p.Owner[i] = -1
		}
	}
	return p
}

// samePlan compares everything but leader and term.
func samePlan(a, b *planData) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Partitions) != len(b.Partitions) || len(a.Members) != len(b.Members) || len(a.Owner) != len(b.Owner) {
		return false
	}
	for i := range a.Partitions {
		if a.Partitions[i] != b.Partitions[i] || a.Owner[i] != b.Owner[i] {
			return false
		}
	}
	for i := range a.Members {
		if a.Members[i] != b.Members[i] {
			return false
		}
	}
	return true
}
