package acl

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// worldPerms counts as open what lets anyone more than read a node, whoever
// else the ACL names.
func TestWorldPerms(t *testing.T) {
	for _, c := range []struct {
		acl  []zk.ACL
		want string
	}{
		{zk.WorldACL(zk.PermAll), "cdrwa"},
		{zk.WorldACL(zk.PermRead), ""},
		{zk.AuthACL(zk.PermAll), ""},
		{zk.DigestACL(zk.PermAll, "app", "pw"), ""},
		{append(zk.DigestACL(zk.PermAll, "app", "pw"), zk.WorldACL(zk.PermRead)...), ""},
		{append(zk.DigestACL(zk.PermAll, "app", "pw"), zk.WorldACL(zk.PermCreate)...), "c"},
		{zk.WorldACL(zk.PermDelete | zk.PermRead), "dr"},
		{zk.WorldACL(zk.PermAdmin), "a"},
		{zk.WorldACL(zk.PermWrite), "w"},
		{[]zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}}, ""},
	} {
		if got := worldPerms(c.acl); got != c.want {
			t.Errorf("worldPerms(%v) = %q, want %q", c.acl, got, c.want)
		}
	}
}
