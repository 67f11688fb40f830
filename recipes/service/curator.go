package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// curatorInstance is a node's data as Curator's JsonInstanceSerializer writes
// a ServiceInstance (curator-x-discovery 5.x), field for field and in its
// order. Curator 5.4 does not write enabled, and reads its absence as true.
type curatorInstance struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             string          `json:"address"`
	Port                *int            `json:"port"`
	SSLPort             *int            `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         string          `json:"serviceType"`
	URISpec             *uriSpec        `json:"uriSpec"`
	Enabled             *bool           `json:"enabled,omitempty"`
}

// uriSpec is Curator's UriSpec as Jackson writes it: its parts, each a literal
// or a {variable}.
type uriSpec struct {
	Parts []uriPart `json:"parts"`
}

type uriPart struct {
	Value    string `json:"value"`
	Variable bool   `json:"variable"`
}

// parseURISpec splits "{scheme}://{address}:{port}" into Curator's parts as
// its UriSpec(String) does: text between braces is a variable, the rest
// literal. Empty is no spec (nil). Unbalanced or nested braces are refused.
func parseURISpec(s string) (*uriSpec, error) {
	if s == "" {
		return nil, nil
	}
	spec := &uriSpec{Parts: []uriPart{}}
	var cur strings.Builder
	inside := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '{':
			if inside {
				return nil, fmt.Errorf("uriSpec %q: a '{' inside a variable: %w", s, ErrInvalidInstance)
			}
			if cur.Len() > 0 {
				spec.Parts = append(spec.Parts, uriPart{Value: cur.String()})
				cur.Reset()
			}
			inside = true
		case '}':
			if !inside {
				return nil, fmt.Errorf("uriSpec %q: a '}' outside a variable: %w", s, ErrInvalidInstance)
			}
			spec.Parts = append(spec.Parts, uriPart{Value: cur.String(), Variable: true})
			cur.Reset()
			inside = false
		default:
			cur.WriteByte(c)
		}
	}
	if inside {
		return nil, fmt.Errorf("uriSpec %q: a variable is not closed: %w", s, ErrInvalidInstance)
	}
	if cur.Len() > 0 {
		spec.Parts = append(spec.Parts, uriPart{Value: cur.String()})
	}
	return spec, nil
}

// String is the spec as written: variables in braces.
func (u *uriSpec) String() string {
	if u == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range u.Parts {
		if p.Variable {
			b.WriteString("{" + p.Value + "}")
		} else {
			b.WriteString(p.Value)
		}
	}
	return b.String()
}

// encode is the node data of instance id of service as Curator writes it.
func encode(service, id string, spec Spec, registered time.Time) ([]byte, error) {
	u, err := parseURISpec(spec.URISpec)
	if err != nil {
		return nil, err
	}
	payload := spec.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	enabled := true
	return json.Marshal(curatorInstance{
		Name: service, ID: id, Address: spec.Address, Port: spec.Port, SSLPort: spec.SSLPort,
		Payload: payload, RegistrationTimeUTC: registered.UnixMilli(), ServiceType: "DYNAMIC",
		URISpec: u, Enabled: &enabled,
	})
}

// decode reads a node's data as Curator's JsonInstanceSerializer does: unknown
// members ignored, enabled absent read as true. false for data that is not a
// service instance (not a JSON object, or without an address).
func decode(id string, data []byte) (Instance, bool) {
	var c curatorInstance
	if err := json.Unmarshal(data, &c); err != nil || c.Address == "" {
		return Instance{}, false
	}
	in := Instance{
		ID: id, Address: c.Address, Port: c.Port, SSLPort: c.SSLPort,
		URISpec: c.URISpec.String(), RegisteredAt: time.UnixMilli(c.RegistrationTimeUTC).UTC(),
		Enabled: c.Enabled == nil || *c.Enabled,
	}
	if p := bytes.TrimSpace(c.Payload); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		in.Payload = json.RawMessage(p)
	}
	return in, true
}
