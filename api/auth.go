package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Scoped bearer tokens (API.md, "Trust boundaries"). Every /v1 request made while
// tokens are configured carries one; the request's principal is what that token
// may do: kinds and names (allow), reads only (readOnly), and the leases it made.

// Token is one bearer token of a tokens file.
type Token struct {
	// Name identifies the token in logs and owns the leases it makes; it matches
	// the name pattern of the API.
	Name string `json:"name"`
	// Token is the secret sent as "Authorization: Bearer <token>".
	Token string `json:"token"`
	// Allow lists "<kind>/<name>" patterns ("locks/billing-*", "queues/*") or "*".
	Allow []string `json:"allow"`
	// ReadOnly tokens may only read: GET and event streams.
	ReadOnly bool `json:"readOnly"`
	// MaxLeases, MaxStreams and MaxWaiters cap the live leases, open event
	// streams and long-polls of this token (0: none); absent, each is half the
	// sidecar's global cap (at least 1). See principal.share.
	MaxLeases  *int `json:"maxLeases,omitempty"`
	MaxStreams *int `json:"maxStreams,omitempty"`
	MaxWaiters *int `json:"maxWaiters,omitempty"`
}

// TokensFile is the JSON document of --tokens-file.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// Kinds are the kinds an allow entry may name.
var Kinds = []string{"locks", "rwlocks", "semaphores", "elections", "barriers", "double-barriers",
	"queues", "throughput", "kv", "counters", "groups", "partitions"}

// AllTokenName is the name of the --token token, allowed everything. It cannot
// clash with a tokens file's names, which match the API's name pattern.
const AllTokenName = "--token"

var (
	tokenNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	namePatternRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]{0,127}\*?|\*)$`)
)

// ParseTokens reads a tokens file and checks it whole: unknown fields, a missing
// or duplicate name or token, an unknown kind or a malformed pattern are errors.
func ParseTokens(data []byte) ([]Token, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f TokensFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if f.Tokens == nil {
		return nil, errors.New(`tokens file: no "tokens" list`)
	}
	for _, tk := range f.Tokens {
		if len(tk.Token) < 16 {
			return nil, fmt.Errorf("tokens file: token %q: the token must be at least 16 characters", tk.Name)
		}
	}
	if _, err := compileTokens(f.Tokens); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return f.Tokens, nil
}

// Tokens is the set of tokens a Server accepts, replaced whole by Set (a SIGHUP
// reload): requests in flight keep the principal they started with. A nil
// Tokens, or one never Set, means no authentication: every request may do
// everything. Once Set, authentication is required, even with an empty list
// (then no request passes): emptying a tokens file never opens the sidecar.
type Tokens struct {
	v atomic.Pointer[tokenSet]
}

// NewTokens makes a token set from list.
func NewTokens(list []Token) (*Tokens, error) {
	t := &Tokens{}
	return t, t.Set(list)
}

// Set replaces the tokens with list, unless list is invalid.
func (t *Tokens) Set(list []Token) error {
	set, err := compileTokens(list)
	if err != nil {
		return err
	}
	t.v.Store(set)
	return nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	if set := t.v.Load(); set != nil {
		return len(set.byName)
	}
	return 0
}

func (t *Tokens) load() *tokenSet {
	if t == nil {
		return nil
	}
	return t.v.Load()
}

type tokenSet struct {
	byHash map[[32]byte]*principal
	byName map[string]*principal
}

// principal is what a request may do.
type principal struct {
	name     string
	readOnly bool
	all      bool    // allowed every kind and name
	allow    []grant // else these
	hash     [32]byte
	// caps are the token's own caps (Token.MaxLeases, ...): -1 where the
	// tokens file gives none (then half the global cap, see share).
	caps [numShares]int
	// shared is false for the principals no own cap applies to: anonymous (no
	// tokens configured) and --token's, which the operator holds.
	shared bool
}

// The resources a token holds a share of (principal.caps).
const (
	shareLeases = iota
	shareStreams
	shareWaiters
	numShares
)

// share is the most of a resource whose global cap is global that the
// principal may hold, and whether that is a cap of its own (else the global
// one): its own cap when the tokens file gives one, else half of global,
// rounded down but at least 1 (so that a cap of 1 still lets one through);
// global for a principal without a share, or when its own is not lower.
func (p *principal) share(res int, global int) (int, bool) {
	own := global
	switch {
	case !p.shared:
	case p.caps[res] >= 0:
		own = p.caps[res]
	default:
		own = max(1, global/2)
	}
	if own >= global {
		return global, false
	}
	return own, true
}

// shareFields are the tokens file's fields of the shares.
var shareFields = [numShares]string{"maxLeases", "maxStreams", "maxWaiters"}

// grant is one compiled allow entry.
type grant struct {
	kind   string // "*" or a kind
	name   string // the name, or its prefix when prefix is set
	prefix bool
}

// anonymous is the principal of every request when no token is configured.
var anonymous = &principal{all: true}

func compileTokens(list []Token) (*tokenSet, error) {
	set := &tokenSet{byHash: map[[32]byte]*principal{}, byName: map[string]*principal{}}
	for i, tk := range list {
		if tk.Name != AllTokenName && !tokenNameRE.MatchString(tk.Name) {
			return nil, fmt.Errorf("token %d: name %q must match %s", i, tk.Name, tokenNameRE)
		}
		if tk.Token == "" {
			return nil, fmt.Errorf("token %q: no token", tk.Name)
		}
		if strings.ContainsAny(tk.Token, " \t\r\n") {
			return nil, fmt.Errorf("token %q: the token contains white space", tk.Name)
		}
		if _, dup := set.byName[tk.Name]; dup {
			return nil, fmt.Errorf("token %q: the name is used twice", tk.Name)
		}
		p := &principal{name: tk.Name, readOnly: tk.ReadOnly, hash: sha256.Sum256([]byte(tk.Token)),
			shared: tk.Name != AllTokenName}
		for res, v := range [numShares]*int{tk.MaxLeases, tk.MaxStreams, tk.MaxWaiters} {
			p.caps[res] = -1
			if v == nil {
				continue
			}
			if *v < 0 {
				return nil, fmt.Errorf("token %q: %s=%d is negative", tk.Name, shareFields[res], *v)
			}
			p.caps[res] = *v
		}
		if _, dup := set.byHash[p.hash]; dup {
			return nil, fmt.Errorf("token %q: the same token is given twice", tk.Name)
		}
		for _, a := range tk.Allow {
			g, err := parseGrant(a)
			if err != nil {
				return nil, fmt.Errorf("token %q: %w", tk.Name, err)
			}
			if g.kind == "*" && g.prefix && g.name == "" {
				p.all = true
			}
			p.allow = append(p.allow, g)
		}
		set.byHash[p.hash] = p
		set.byName[p.name] = p
	}
	return set, nil
}

func parseGrant(a string) (grant, error) {
	if a == "*" {
		return grant{kind: "*", prefix: true}, nil
	}
	kind, name, ok := strings.Cut(a, "/")
	if !ok {
		return grant{}, fmt.Errorf("allow %q: want <kind>/<name>, <kind>/* or *", a)
	}
	if kind != "*" && !isKind(kind) {
		return grant{}, fmt.Errorf("allow %q: unknown kind %q (one of %s, or *)", a, kind, strings.Join(Kinds, ", "))
	}
	if !namePatternRE.MatchString(name) {
		return grant{}, fmt.Errorf("allow %q: the name must be a name, a name ending in *, or *", a)
	}
	g := grant{kind: kind, name: strings.TrimSuffix(name, "*"), prefix: strings.HasSuffix(name, "*")}
	return g, nil
}

func isKind(k string) bool {
	for _, kind := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// may reports whether the principal may act on kind/name (write: change it).
func (p *principal) may(kind, name string, write bool) bool {
	if write && p.readOnly {
		return false
	}
	return p.reaches(kind, name)
}

// reaches reports whether kind/name is inside the principal's allow list.
func (p *principal) reaches(kind, name string) bool {
	if p.all {
		return true
	}
	for _, g := range p.allow {
		if g.kind != "*" && g.kind != kind {
			continue
		}
		if g.prefix && strings.HasPrefix(name, g.name) || !g.prefix && name == g.name {
			return true
		}
	}
	return false
}

type principalKey struct{}

// principalOf is the principal of the request whose context ctx is.
func principalOf(ctx context.Context) *principal {
	if p, ok := ctx.Value(principalKey{}).(*principal); ok {
		return p
	}
	return anonymous
}

// authenticate finds the request's principal: with no tokens configured every
// request is anonymous (allowed everything); else every /v1 request needs a known
// bearer token (or, on GET /v1/events only, the status page's ticket cookie), and
// is refused with 401 before anything else happens. The lookup is by the token's
// SHA-256, so its time does not depend on how much of a token matches.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := s.opt.Tokens.load()
		if set == nil || !(strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1") {
			next.ServeHTTP(w, r)
			return
		}
		p := set.bearer(r)
		if p == nil && r.Method == http.MethodGet && r.URL.Path == "/v1/events" {
			p = s.ticketPrincipal(set, r)
		}
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="coord-sidecar"`)
			s.writeProblem(w, r, NewProblem(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// bearer is the principal of the request's bearer token, or nil.
func (set *tokenSet) bearer(r *http.Request) *principal {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return nil
	}
	return set.byHash[sha256.Sum256([]byte(got))]
}

// authorize refuses, with 403 forbidden and before any ZooKeeper call, a request
// on a kind and name outside its token's allow list, and any request but a read
// (GET, HEAD: reads and event streams) of a read-only token. Lists, the session
// and /v1/events are open to every token (lists and the stream show only what
// the token may read); leases are checked by their handlers (a lease of another
// token does not exist).
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r.Context())
		if p == anonymous || !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		if write && p.readOnly {
			s.writeProblem(w, r, NewProblem(http.StatusForbidden, "forbidden",
				fmt.Sprintf("token %q is read-only: only GET requests and event streams", p.name)))
			return
		}
		kind, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
		if !isKind(kind) || rest == "" {
			next.ServeHTTP(w, r)
			return
		}
		name, _, _ := strings.Cut(rest, "/")
		if !p.may(kind, name, write) {
			s.writeProblem(w, r, NewProblem(http.StatusForbidden, "forbidden",
				fmt.Sprintf("token %q is not allowed %s/%s", p.name, kind, name)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mayRead reports whether the request's token may see kind/name (lists, streams).
func mayRead(ctx context.Context, kind, name string) bool {
	return principalOf(ctx).reaches(kind, name)
}

// overviewKinds maps the kinds of the "all" topic's keys to token kinds.
var overviewKinds = map[string]string{
	"lock": "locks", "election": "elections", "throughput": "throughput", "queue": "queues",
	"barrier": "barriers", "double-barrier": "double-barriers",
	"kv": "kv", "counter": "counters",
	"semaphore": "semaphores", "rwlock": "rwlocks",
	"group": "groups", "partitions": "partitions",
}

// overviewFilter is the key filter of the request's /v1/events stream: nil (all)
// for a principal allowed everything.
func overviewFilter(ctx context.Context) func(key string) bool {
	p := principalOf(ctx)
	if p.all {
		return nil
	}
	return func(key string) bool {
		k, name, ok := strings.Cut(key, "/")
		if !ok {
			return true // "session"
		}
		kind, known := overviewKinds[k]
		return known && p.reaches(kind, name)
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

func (s *Server) ticketMAC(p *principal, expiry int64) string {
	m := hmac.New(sha256.New, s.ticketKey)
	fmt.Fprintf(m, "%s\x00%d\x00", p.name, expiry)
	m.Write(p.hash[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// serveTicket is POST /ui/ticket: with a valid bearer token it sets the ticket
// cookie (204); without tokens configured there is nothing to trade (204, no
// cookie).
func (s *Server) serveTicket(w http.ResponseWriter, r *http.Request) {
	set := s.opt.Tokens.load()
	if set == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	p := set.bearer(r)
	if p == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="coord-sidecar"`)
		s.writeProblem(w, r, NewProblem(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
		return
	}
	expiry := time.Now().Add(ticketTTL).Unix()
	value := base64.RawURLEncoding.EncodeToString([]byte(p.name)) + "." + strconv.FormatInt(expiry, 10) + "." + s.ticketMAC(p, expiry)
	http.SetCookie(w, &http.Cookie{
		Name: ticketCookie, Value: value, Path: "/v1/events", MaxAge: int(ticketTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// ticketPrincipal is the principal of a valid ticket cookie, or nil.
func (s *Server) ticketPrincipal(set *tokenSet, r *http.Request) *principal {
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
	p := set.byName[string(rawName)]
	if p == nil || !hmac.Equal([]byte(parts[2]), []byte(s.ticketMAC(p, expiry))) {
		return nil
	}
	return p
}
