package api

import (
	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
)

// RegisterUnmoved registers the recipes whose HTTP side has not yet moved to
// a folder of its own (issue 25): it goes once the last one has.
func (s *Server) RegisterUnmoved() {
	s.Register(Recipe{
		Topics: map[string]func(topic, name string) func(){"election": s.followElection},
		Kinds: []PictureKind{{Kind: "election", Event: "leader", Dir: "elections", Field: "name",
			Follow: Followed(s.opt.Elections.Follow, func(st *election.ElectionState) any { return electionBody(st) })}},
	})
	s.Register(Recipe{
		Topics: map[string]func(topic, name string) func(){"throughput": s.followThroughput},
		Kinds: []PictureKind{{Kind: "throughput", Event: "throughput", Dir: "throughput", Field: "group",
			Follow: Followed(s.opt.Throughput.Follow, func(g *throughput.ThroughputGroup) any {
				if g.Suspended {
					return nil // as the group's own stream: the last state stands
				}
				return throughputBody(g)
			})}},
	})
	s.Register(Recipe{
		Kinds: []PictureKind{
			{Kind: "barrier", Event: "barrier", Dir: "barriers", Field: "name",
				Follow: s.Inspected("barriers", BodyOf(s.readBarrier), nil)},
			{Kind: "double-barrier", Event: "double-barrier", Dir: "double-barriers", Field: "name",
				Follow: s.Inspected("double-barriers", BodyOf(s.readDoubleBarrier), nil)},
		},
	})
	s.Register(Recipe{
		Kinds: []PictureKind{{Kind: "semaphore", Event: "semaphore", Dir: "semaphores", Field: "name",
			Follow: Followed(s.opt.Semaphores.Follow, func(st *recipes.SemaphoreState) any { return semaphoreBody(st) })}},
	})
	s.Register(Recipe{
		Kinds: []PictureKind{{Kind: "rwlock", Event: "rwlock", Dir: "rwlocks", Field: "name",
			Follow: Followed(s.opt.RWLocks.Follow, func(st *recipes.RWLockState) any { return rwlockBody(st) })}},
	})
	s.Register(Recipe{
		Topics: map[string]func(topic, name string) func(){"group": s.followGroup},
		Kinds: []PictureKind{{Kind: "group", Event: "group", Dir: "groups", Field: "group",
			Follow: Followed(s.opt.Groups.Follow, func(st *group.State) any {
				if st.Suspended {
					return nil // as the group's own stream: the session stream says so
				}
				return groupBody(st)
			})}},
	})
	s.Register(Recipe{
		Topics: map[string]func(topic, name string) func(){"partitions": s.followPartitions},
		Kinds: []PictureKind{{Kind: "partitions", Event: "partitions", Dir: "partitions", Field: "group",
			Follow: Followed(s.opt.Partitions.Follow, func(st *partition.State) any { return partitionGroupBody(st) })}},
	})
}
