package zookeeper

import (
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Credentials are ZooKeeper authentication data, as kazoo's auth_data and
// Curator's authorization: Scheme "digest" with Auth "user:password".
type Credentials struct {
	Scheme string
	Auth   string
}

// ParseCredentials reads "scheme:auth" ("digest:user:password").
func ParseCredentials(s string) (Credentials, error) {
	scheme, auth, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || scheme == "" || auth == "" {
		return Credentials{}, errors.New(`want "digest:user:password"`)
	}
	if scheme == "digest" && !strings.Contains(auth, ":") {
		return Credentials{}, errors.New(`digest credentials are "digest:user:password"`)
	}
	return Credentials{Scheme: scheme, Auth: auth}, nil
}

var (
	openACL    = zk.WorldACL(zk.PermAll)
	creatorACL = zk.AuthACL(zk.PermAll) // CREATOR_ALL_ACL: the ids the creating session authenticated as
)

// acl is the ACL of every node the sidecar creates, parents and the root
// included: creator-only when the Session has credentials (every session
// authenticated with the same credentials may do everything, anyone else
// nothing, not even read), else open to anyone.
func (s *Session) acl() []zk.ACL {
	if s.cfg.Auth != nil {
		return creatorACL
	}
	return openACL
}

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
