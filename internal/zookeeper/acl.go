package zookeeper

import (
	"context"
	"path"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
)

// The ACL check of the root and the recipe parents (acl.Checker): with
// credentials, the Session runs it at every connect and reconnect, when Dir
// names a new parent, and periodically.

// Dir returns the recipe parent root/name, under which a recipe keeps its
// nodes, and adds it to the nodes whose ACL the Session checks. An absolute
// name is the parent itself, outside the root (the services' --services-base).
func (s *Session) Dir(name string) string {
	p := path.Join(s.cfg.Root, name)
	if path.IsAbs(name) {
		p = path.Clean(name)
	}
	s.acls.Add(p)
	return p
}

// ACLs returns what the last ACL check found.
func (s *Session) ACLs() acl.Report { return s.acls.Report() }

// ACLReady tells whether the ACL check lets the sidecar be ready: always
// without Config.RequireACL; with it, once a check has found nothing open.
func (s *Session) ACLReady() error { return s.acls.Ready() }

// GetACL reads a node's ACL.
func (ep *Epoch) GetACL(ctx context.Context, p string) ([]zk.ACL, error) {
	return read(ctx, ep, func(c *zk.Conn) ([]zk.ACL, error) {
		a, _, err := c.GetACL(p)
		return a, err
	})
}

// checkACLs runs the ACL checks until Close (acl.Checker.Run).
func (s *Session) checkACLs() {
	s.acls.Run(s.closing, s.Changed, func() acl.Conn {
		if ep, err := s.Current(); err == nil {
			return ep
		}
		return nil
	})
}
