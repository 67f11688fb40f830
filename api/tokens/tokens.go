// Package tokens is the data model of the scoped bearer tokens
// (docs/SECURITY.md): the tokens file, the set of tokens a sidecar accepts, and the
// principal a token makes of a request: the kinds and names it may touch
// (allow), whether it may only read (readOnly), and its own share of the
// sidecar's global caps. The HTTP middleware that applies them is api's.
package tokens

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
)

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
	// streams and long-polls of this token (0: none); absent, each is the
	// sidecar's global cap divided by the number of tokens in the file (at
	// least 1). See Principal.Share.
	MaxLeases  *int `json:"maxLeases,omitempty"`
	MaxStreams *int `json:"maxStreams,omitempty"`
	MaxWaiters *int `json:"maxWaiters,omitempty"`
}

// TokensFile is the JSON document of --tokens-file.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// Kinds are the token kinds an allow entry may name ("locks" in
// "locks/billing-*"): the first path segments under /v1/ whose names a token's
// allow list governs. The sidecar's are those of its registered recipes
// (api/registry.TokenKinds), in their order, which an error listing them
// keeps.
type Kinds []string

// Has reports whether k is one of kinds.
func (kinds Kinds) Has(k string) bool {
	for _, kind := range kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// AllTokenName is the name of the --token token, allowed everything. It cannot
// clash with a tokens file's names, which match the API's name pattern.
const AllTokenName = "--token"

var (
	tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// A name pattern: a name, a name ending in *, or *, after any number of
	// names and "/" (the keys of a tree: kv/config/*).
	namePatternRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]{0,127}/)*([A-Za-z0-9][A-Za-z0-9._-]{0,127}\*?|\*)$`)
)

// ParseTokens reads a tokens file and checks it whole: unknown fields, a missing
// or duplicate name or token, a kind not one of kinds or a malformed pattern
// are errors.
func ParseTokens(data []byte, kinds Kinds) ([]Token, error) {
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
	if _, err := compileTokens(f.Tokens, kinds); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return f.Tokens, nil
}

// Tokens is the set of tokens the API accepts (api.Options.Tokens), replaced
// whole by Set (a SIGHUP reload): requests in flight keep the principal they
// started with. A nil Tokens, or one never Set, means no authentication: every
// request may do everything. Once Set, authentication is required, even with an empty list
// (then no request passes): emptying a tokens file never opens the sidecar.
type Tokens struct {
	kinds Kinds
	v     atomic.Pointer[Snapshot]
}

// New makes a token set, never Set yet, whose allow entries may name kinds.
func New(kinds Kinds) *Tokens { return &Tokens{kinds: kinds} }

// NewTokens makes a token set from list, whose allow entries may name kinds.
func NewTokens(list []Token, kinds Kinds) (*Tokens, error) {
	t := New(kinds)
	return t, t.Set(list)
}

// Set replaces the tokens with list, unless list is invalid.
func (t *Tokens) Set(list []Token) error {
	set, err := compileTokens(list, t.kinds)
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

// Active is the token set in force, or nil when there is no authentication (t
// nil or never Set). A request looks its principal up in one Snapshot: a reload
// meanwhile does not change what it finds.
func (t *Tokens) Active() *Snapshot {
	if t == nil {
		return nil
	}
	return t.v.Load()
}

// Snapshot is the token set of one Set, never changed after.
type Snapshot struct {
	byHash map[[32]byte]*Principal
	byName map[string]*Principal
}

// ByBearer is the principal of the request's bearer token, or nil. The lookup
// is by the token's SHA-256, so its time does not depend on how much of a token
// matches.
func (set *Snapshot) ByBearer(r *http.Request) *Principal {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return nil
	}
	return set.byHash[sha256.Sum256([]byte(got))]
}

// ByName is the principal of the token named name, or nil.
func (set *Snapshot) ByName(name string) *Principal { return set.byName[name] }

// ownCaps is the token's own caps (MaxLeases, MaxStreams, MaxWaiters, in
// Share order): -1 where it gives none; a negative one is refused.
func (tk Token) ownCaps() ([NumShares]int, error) {
	var caps [NumShares]int
	for res, v := range [NumShares]*int{tk.MaxLeases, tk.MaxStreams, tk.MaxWaiters} {
		caps[res] = -1
		if v == nil {
			continue
		}
		if *v < 0 {
			return caps, fmt.Errorf("token %q: %s=%d is negative", tk.Name, ShareFields[res], *v)
		}
		caps[res] = *v
	}
	return caps, nil
}

func compileTokens(list []Token, kinds Kinds) (*Snapshot, error) {
	set := &Snapshot{byHash: map[[32]byte]*Principal{}, byName: map[string]*Principal{}}
	tenants := countTenants(list)
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
		caps, err := tk.ownCaps()
		if err != nil {
			return nil, err
		}
		p := &Principal{name: tk.Name, readOnly: tk.ReadOnly, hash: sha256.Sum256([]byte(tk.Token)),
			shared: tk.Name != AllTokenName, caps: caps, tenants: tenants}
		if _, dup := set.byHash[p.hash]; dup {
			return nil, fmt.Errorf("token %q: the same token is given twice", tk.Name)
		}
		for _, a := range tk.Allow {
			g, err := parseGrant(a, kinds)
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

// Oversubscribed describes each global cap (globals, in Share order: leases,
// streams, waiters) that the tokens' shares in list add up to more than: then a
// token within its share may still find the global cap used up by the others.
// A token's share is its own cap, or the default share (DefaultShare) where it
// gives none; --token's holds none. Only a cap that some token sets for itself
// is reported: the default shares alone add up to more only when a global cap
// is smaller than the number of tokens.
func Oversubscribed(list []Token, globals [NumShares]int) []string {
	tenants := countTenants(list)
	var out []string
	for res := range NumShares {
		sum, explicit := 0, false
		for _, tk := range list {
			if tk.Name == AllTokenName {
				continue
			}
			caps, err := tk.ownCaps()
			switch {
			case err != nil:
				continue
			case caps[res] >= 0:
				sum += min(caps[res], globals[res])
				explicit = true
			default:
				sum += DefaultShare(globals[res], tenants)
			}
		}
		if explicit && sum > globals[res] {
			out = append(out, fmt.Sprintf("the tokens' %s add up to %d, more than the global cap %d", ShareFields[res], sum, globals[res]))
		}
	}
	return out
}

// countTenants is the number of tokens in list that hold a share: all but
// --token's.
func countTenants(list []Token) int {
	n := 0
	for _, tk := range list {
		if tk.Name != AllTokenName {
			n++
		}
	}
	return n
}
