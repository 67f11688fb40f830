package picture_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// A name's body is the count of its node's children; a name with a child
// "hide" is not shown (picture.ErrSkip).
type counted struct {
	Name     string `json:"name"`
	Children int    `json:"children"`
}

func countRead(s *zookeeper.Session, dir string) func(context.Context, string) (counted, error) {
	return func(ctx context.Context, name string) (counted, error) {
		ep, err := s.Current()
		if err != nil {
			return counted{}, err
		}
		kids, _, err := ep.Children(ctx, s.Root()+"/"+dir+"/"+name)
		if err != nil {
			return counted{}, err
		}
		if slices.Contains(kids, "hide") || strings.HasPrefix(name, "never-") {
			return counted{}, picture.ErrSkip
		}
		return counted{Name: name, Children: len(kids)}, nil
	}
}

// shown records, by key, the last thing the picture said of it: the body
// published ("event data") or the farewell ("-event data").
type shown struct {
	mu    sync.Mutex
	last  map[string]string
	calls int
}

func (r *shown) publish(key, event string, data []byte) { r.set(key, event+" "+string(data)) }
func (r *shown) forget(key, event string, data []byte)  { r.set(key, "-"+event+" "+string(data)) }

func (r *shown) set(key, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[key] = v
	r.calls++
}

func (r *shown) get(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[key]
}

func (r *shown) await(t *testing.T, key, want, what string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, func() bool { return r.get(key) == want })
}

func create(t *testing.T, ep *zookeeper.Epoch, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := ep.Create(context.Background(), p, nil, zookeeper.Persistent); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

func remove(t *testing.T, ep *zookeeper.Epoch, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := ep.Delete(context.Background(), p, -1); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
}

// The picture shows every name of every section under its section's name and
// event, as it is and as it changes; a name that leaves, or that its read no
// longer shows, gets its farewell {"deleted": true, <field>: name}; the two
// sections' names are kept apart by their keys; after stop nothing more is
// said.
func TestFollowShowsEverySection(t *testing.T) {
	s := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ep.EnsurePersistent(ctx, s.Root()); err != nil {
		t.Fatal(err)
	}
	things, others := s.Root()+"/things", s.Root()+"/others"
	create(t, ep, things, things+"/a", things+"/a/x", things+"/b", others, others+"/a")

	sections := []picture.Section{
		{Name: "thing", Token: "things", Event: "thing-event", Dir: "things", Field: "name",
			Follow: picture.Inspected(s, "things", picture.BodyOf(countRead(s, "things")), nil)},
		{Name: "other", Token: "others", Event: "other-event", Dir: "others", Field: "group",
			Follow: picture.Inspected(s, "others", picture.BodyOf(countRead(s, "others")), nil)},
	}
	r := &shown{last: map[string]string{}}
	stop := picture.Follow(ctx, s, sections, r.publish, r.forget)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	r.await(t, "thing/a", `thing-event {"name":"a","children":1}`, "thing a as it is")
	r.await(t, "thing/b", `thing-event {"name":"b","children":0}`, "thing b as it is")
	r.await(t, "other/a", `other-event {"name":"a","children":0}`, "the other section's a, apart from thing a")

	create(t, ep, things+"/b/y")
	r.await(t, "thing/b", `thing-event {"name":"b","children":1}`, "a change of b")
	create(t, ep, things+"/c")
	r.await(t, "thing/c", `thing-event {"name":"c","children":0}`, "a name that appears")

	remove(t, ep, things+"/a/x", things+"/a")
	r.await(t, "thing/a", `-thing-event {"deleted":true,"name":"a"}`, "the farewell of a name that leaves")
	create(t, ep, things+"/b/hide")
	r.await(t, "thing/b", `-thing-event {"deleted":true,"name":"b"}`, "the farewell of a name no longer shown")
	remove(t, ep, others+"/a")
	r.await(t, "other/a", `-other-event {"deleted":true,"group":"a"}`, "a farewell names the section's field")
	if got := r.get("thing/a"); got != `-thing-event {"deleted":true,"name":"a"}` {
		t.Errorf("thing a after the other section's a left: %s", got)
	}

	stop()
	stopped = true
	r.mu.Lock()
	calls := r.calls
	r.mu.Unlock()
	create(t, ep, things+"/d", others+"/e")
	time.Sleep(200 * time.Millisecond) // a change after stop has time to show up, and must not
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls != calls {
		t.Errorf("after stop the picture said %d more things: %v", r.calls-calls, r.last)
	}
}

// A name that is never shown (its read answers ErrSkip from the start) and
// then leaves gets no farewell: nothing was shown of it.
func TestFollowSaysNothingOfWhatWasNeverShown(t *testing.T) {
	s := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ep.EnsurePersistent(ctx, s.Root()); err != nil {
		t.Fatal(err)
	}
	dir := s.Root() + "/things"
	// A name under "never-" is skipped by every read, whatever its children:
	// one skipped for a child could be read between its child's delete and
	// its own, and then shown (rightly) for that moment.
	create(t, ep, dir, dir+"/never-shown", dir+"/never-shown/hide", dir+"/seen")
	r := &shown{last: map[string]string{}}
	stop := picture.Follow(ctx, s, []picture.Section{{Name: "thing", Event: "thing", Dir: "things", Field: "name",
		Follow: picture.Inspected(s, "things", picture.BodyOf(countRead(s, "things")), nil)}}, r.publish, r.forget)
	defer stop()
	r.await(t, "thing/seen", `thing {"name":"seen","children":0}`, "the shown name")
	remove(t, ep, dir+"/never-shown/hide", dir+"/never-shown")
	remove(t, ep, dir+"/seen")
	r.await(t, "thing/seen", `-thing {"deleted":true,"name":"seen"}`, "the shown name's farewell")
	if got := r.get("thing/never-shown"); got != "" {
		t.Errorf("the never shown name: %s", got)
	}
}

// BodyOf turns a read into the JSON the picture publishes: ErrSkip is nothing
// shown (nil, no error), another error stays an error.
func TestBodyOf(t *testing.T) {
	boom := errors.New("boom")
	read := picture.BodyOf(func(_ context.Context, name string) (counted, error) {
		switch name {
		case "skip":
			return counted{}, fmt.Errorf("wrapped: %w", picture.ErrSkip)
		case "fail":
			return counted{}, boom
		}
		return counted{Name: name, Children: 2}, nil
	})
	ctx := context.Background()
	if b, err := read(ctx, "n"); err != nil || string(b) != `{"name":"n","children":2}` {
		t.Errorf("read n: %s, %v", b, err)
	}
	if b, err := read(ctx, "skip"); err != nil || b != nil {
		t.Errorf("read of a skipped name: %q, %v; want nil, nil", b, err)
	}
	if _, err := read(ctx, "fail"); !errors.Is(err, boom) {
		t.Errorf("read of a failing name: %v, want boom", err)
	}
}
