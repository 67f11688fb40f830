// Package acl is who may touch the sidecar's ZooKeeper nodes: the credentials
// a session authenticates with, the ACL of every node the sidecar creates
// (ForCreate: creator-only with credentials, else open), and the check of the
// root and the recipe parents, which someone else may have created open to
// anyone (Checker).
//
// It makes no call itself: internal/zookeeper adds the credentials to its
// connections and hands the Checker a function that reads a node's ACL.
package acl

import (
	"errors"
	"strings"

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

// ForCreate is the ACL of every node the sidecar creates, parents and the root
// included: creator-only when the session has credentials (auth not nil: every
// session authenticated with the same credentials may do everything, anyone
// else nothing, not even read), else open to anyone.
func ForCreate(auth *Credentials) []zk.ACL {
	if auth != nil {
		return creatorACL
	}
	return openACL
}
