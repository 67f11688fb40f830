package zookeeper

import (
	"errors"
	"reflect"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestOpResultLayout: results reads go-zookeeper's MultiResponses in place as
// OpResults, so the two must have the same fields, of the same types, at the
// same offsets.
func TestOpResultLayout(t *testing.T) {
	ours, theirs := reflect.TypeFor[OpResult](), reflect.TypeFor[zk.MultiResponse]()
	if ours.Size() != theirs.Size() || ours.NumField() != theirs.NumField() {
		t.Fatalf("OpResult: %d bytes, %d fields; zk.MultiResponse: %d bytes, %d fields",
			ours.Size(), ours.NumField(), theirs.Size(), theirs.NumField())
	}
	for i := range ours.NumField() {
		a, b := ours.Field(i), theirs.Field(i)
		if a.Type != b.Type || a.Offset != b.Offset {
			t.Errorf("field %d: OpResult.%s %s at %d, zk.MultiResponse.%s %s at %d",
				i, a.Name, a.Type, a.Offset, b.Name, b.Type, b.Offset)
		}
	}
	st := &zk.Stat{Czxid: 7}
	fail := errors.New("refused")
	res := results([]zk.MultiResponse{{Stat: st, String: "/a"}, {Error: fail}})
	if len(res) != 2 || res[0].Stat != st || res[0].Path != "/a" || res[0].Err != nil ||
		res[1].Err != fail || res[1].Path != "" || res[1].Stat != nil {
		t.Fatalf("results = %+v", res)
	}
	if results(nil) != nil {
		t.Fatal("results(nil) is not nil")
	}
}
