package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/tokens"
)

// Scoped bearer tokens (docs/SECURITY.md), applied: every /v1 request
// made while tokens are configured carries one, and may do what its principal
// (tokens.Principal) may.

// principalOf is the request's token's name, which Owns compares with a
// lease's owner; the principal itself is tokens.FromContext.
func principalOf(ctx context.Context) struct{ name string } {
	return struct{ name string }{tokens.FromContext(ctx).Name()}
}

// authenticate finds the request's principal: with no tokens configured every
// request is anonymous (allowed everything); else every /v1 request needs a known
// bearer token (or, on GET /v1/events only, the status page's ticket cookie), and
// is refused with 401 before anything else happens. The lookup is by the token's
// SHA-256, so its time does not depend on how much of a token matches.
//
// A request it gives a principal goes to next (authorize, then the rest); one
// it leaves anonymous (no tokens configured, or a path outside /v1) goes to
// open, the rest without authorize, which lets every such request through:
// no context lookup of a principal that is not there (issue 41).
func (s *Server) authenticate(next, open http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := s.opt.Tokens.Active()
		if set == nil || !(strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1") {
			open.ServeHTTP(w, r)
			return
		}
		p := set.ByBearer(r)
		if p == nil && r.Method == http.MethodGet && r.URL.Path == "/v1/events" {
			p = s.ticketPrincipal(set, r)
		}
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="coord-sidecar"`)
			s.refuse(w, r, NewProblem(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
			return
		}
		next.ServeHTTP(w, r.WithContext(tokens.NewContext(r.Context(), p)))
	})
}

// authorize refuses, with 403 forbidden and before any ZooKeeper call, a request
// on a kind and name outside its token's allow list, and any request but a read
// (GET, HEAD: reads and event streams) of a read-only token. Lists, the session
// and /v1/events are open to every token (lists and the stream show only what
// the token may read); leases are checked by their handlers (a lease of another
// token does not exist).
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := tokens.FromContext(r.Context())
		if p == tokens.Anonymous || !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		if write && p.ReadOnly() {
			s.refuse(w, r, NewProblem(http.StatusForbidden, "forbidden",
				fmt.Sprintf("token %q is read-only: only GET requests and event streams", p.Name())))
			return
		}
		kind, name, ok := s.pathName(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !p.May(kind, name, write) {
			s.refuse(w, r, notAllowed(p, kind, name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MayChange refuses, with 403 forbidden, a request whose token may not change
// kind/name: for an operation that names what it changes in a parameter rather
// than in its path (a multi-lock's names), which authorize cannot see.
func MayChange(ctx context.Context, kind, name string) error {
	p := tokens.FromContext(ctx)
	if p == tokens.Anonymous || p.May(kind, name, true) {
		return nil
	}
	return notAllowed(p, kind, name)
}

// notAllowed is the 403 of a token p whose allow list does not reach kind/name.
func notAllowed(p *tokens.Principal, kind, name string) *Problem {
	return NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("token %q is not allowed %s/%s", p.Name(), kind, name))
}

// refuse answers a 401 or 403 problem and closes the connection after it
// (Connection: close): a refused client keeps no connection, so that one
// that sends nothing else holds no place under --max-conns.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, p *Problem) {
	w.Header().Set("Connection", "close")
	s.writeProblem(w, r, p)
}

// mayRead reports whether the request's token may see kind/name (lists, streams).
func mayRead(ctx context.Context, kind, name string) bool {
	return tokens.FromContext(ctx).Reaches(kind, name)
}

// overviewFilter is the key filter of the request's /v1/events stream: nil (all)
// for a principal allowed everything. A key "<section>/<name>" is kept when
// the token reaches name under the section's token kind (picture.Section.Token).
func (s *Server) overviewFilter(ctx context.Context) func(key string) bool {
	p := tokens.FromContext(ctx)
	if p.All() {
		return nil
	}
	return func(key string) bool {
		section, name, ok := strings.Cut(key, "/")
		if !ok {
			return true // "session"
		}
		kind, known := s.sectionTokens[section]
		return known && p.Reaches(kind, name)
	}
}

// The status page's ticket: EventSource cannot send an Authorization header, so
// the page trades its token for a cookie, POST /ui/ticket with the token as
// bearer. The cookie is HttpOnly, SameSite=Strict, scoped to Path=/v1/events,
// accepted on GET /v1/events only, and lasts ticketTTL: it names the token and
// carries an HMAC (a key of this process) over the name, the expiry and the
// token's hash, so it dies with a restart, with its expiry, and when the token
// is removed or changed by a reload.

const (
	ticketCookie = "coord_events"
	ticketTTL    = time.Hour
)

func newTicketKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func (s *Server) ticketMAC(p *tokens.Principal, expiry int64) string {
	m := hmac.New(sha256.New, s.ticketKey)
	fmt.Fprintf(m, "%s\x00%d\x00", p.Name(), expiry)
	hash := p.Hash()
	m.Write(hash[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// serveTicket is POST /ui/ticket: with a valid bearer token it sets the ticket
// cookie (204); without tokens configured there is nothing to trade (204, no
// cookie).
func (s *Server) serveTicket(w http.ResponseWriter, r *http.Request) {
	set := s.opt.Tokens.Active()
	if set == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	p := set.ByBearer(r)
	if p == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="coord-sidecar"`)
		s.refuse(w, r, NewProblem(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
		return
	}
	expiry := time.Now().Add(ticketTTL).Unix()
	value := base64.RawURLEncoding.EncodeToString([]byte(p.Name())) + "." + strconv.FormatInt(expiry, 10) + "." + s.ticketMAC(p, expiry)
	http.SetCookie(w, &http.Cookie{
		Name: ticketCookie, Value: value, Path: "/v1/events", MaxAge: int(ticketTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// ticketPrincipal is the principal of a valid ticket cookie, or nil.
func (s *Server) ticketPrincipal(set *tokens.Snapshot, r *http.Request) *tokens.Principal {
	c, err := r.Cookie(ticketCookie)
	if err != nil {
		return nil
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return nil
	}
	rawName, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil
	}
	expiry, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || time.Now().Unix() > expiry {
		return nil
	}
	p := set.ByName(string(rawName))
	if p == nil || !hmac.Equal([]byte(parts[2]), []byte(s.ticketMAC(p, expiry))) {
		return nil
	}
	return p
}
