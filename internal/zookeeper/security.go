package zookeeper

import (
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
)

// acl is the ACL of every node the sidecar creates, parents and the root
// included: creator-only when the Session has credentials, else open to
// anyone (acl.ForCreate).
func (s *Session) acl() []zk.ACL { return acl.ForCreate(s.cfg.Auth) }

// authenticate adds the Session's credentials to ep's connection, retrying
// until the server has accepted them or ep is lost, then reports it (see
// apply): ep's session counts as connected only once it is authenticated, so
// no node is ever created without its creator-only ACL being satisfiable.
// go-zookeeper re-sends accepted credentials itself on every reconnect of the
// same connection, before any other request.
func (s *Session) authenticate(ep *Epoch) {
	cred := s.cfg.Auth
	for {
		err := ep.conn.AddAuth(cred.Scheme, []byte(cred.Auth))
		if err == nil {
			s.enqueueEvent(queuedEvent{ep: ep, authed: true})
			return
		}
		s.log.Debug("zookeeper: adding credentials", "err", err)
		select {
		case <-ep.lost:
			return
		case <-s.closing:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
