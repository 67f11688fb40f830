package api

import (
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	"github.com/coord-sidecar/coord-sidecar/recipes/kv"
)

// RegisterUnmoved registers the recipes whose HTTP side has not yet moved to
// a folder of its own (issue 25): it goes once the last one has.
func (s *Server) RegisterUnmoved() {
	s.Register(Recipe{
		Kinds: []PictureKind{{Kind: "queue", Event: "queue", Dir: "queues", Field: "name",
			Follow: s.Inspected("queues", BodyOf(s.readQueue), queueParts.MatchString)}},
	})
	s.Register(Recipe{
		Topics: map[string]func(topic, name string) func(){"kv": s.followKey},
		Kinds: []PictureKind{{Kind: "kv", Event: "kv", Dir: "kv", Field: "key",
			Follow: Followed(s.opt.KV.Follow, func(v *kv.Value) any {
				if v.Unknown || !v.Exists {
					return nil // its directory's watch says when it is gone
				}
				return oapi.KeyInfo{Key: v.Key, Version: v.Version, Size: len(v.Data)}
			})}},
	})
	s.Register(Recipe{
		Kinds: []PictureKind{{Kind: "counter", Event: "counter", Dir: "counters", Field: "name",
			Follow: Followed(s.opt.Counters.Follow, func(st *counter.State) any {
				if st.Unknown || !st.Exists || st.Corrupt {
					return nil
				}
				return oapi.Counter{Name: st.Name, Value: st.Value}
			})}},
	})
}
