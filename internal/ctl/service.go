package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// serviceRegisterUsage is `coord-sidecar service register --help`.
const serviceRegisterUsage = `service register SERVICE --id ID --address A [--port P] [flags] -- COMMAND ARGS...

Registers the instance ID of SERVICE (its address, ports, payload and uriSpec,
in the layout of Curator's ServiceDiscovery) on a lease the wrapper keeps
alive, runs COMMAND with COORD_LEASE in its environment while the lease lives,
unregisters the instance when COMMAND exits and exits with its code: the
instance is listed exactly while COMMAND runs. Everything else is as the lock
wrapper does it (coord-sidecar lock --help): signals passed on (exit 128+N), a
restart of the sidecar or a suspension of its session ridden through. It exits
65 when another lease (or Curator) holds the instance ID (COMMAND never
started), 64 when the sidecar refuses the instance, 76 when the lease was lost
while COMMAND ran: COMMAND was stopped.`

// instanceFlags are the instance a service register describes.
type instanceFlags struct {
	id, address, payload, uriSpec string
	port, sslPort                 int
}

func (in *instanceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&in.id, "id", "", "the instance's id, unique in the service (required)")
	fs.StringVar(&in.address, "address", "", "the host name or address clients reach the instance at (required)")
	fs.IntVar(&in.port, "port", -1, "its port (0..65535; default: none)")
	fs.IntVar(&in.sslPort, "ssl-port", -1, "its TLS port (0..65535; default: none)")
	fs.StringVar(&in.payload, "payload", "", "any JSON value stored with it (default: none)")
	fs.StringVar(&in.uriSpec, "uri-spec", "", "Curator's UriSpec, e.g. {scheme}://{address}:{port} (default: none)")
}

// body is the instance's request body, or why the flags cannot make one.
func (in *instanceFlags) body() (map[string]any, string) {
	switch {
	case in.id == "":
		return nil, "--id is required"
	case strings.TrimSpace(in.address) == "":
		return nil, "--address is required"
	case in.payload != "" && !json.Valid([]byte(in.payload)):
		return nil, "--payload is not JSON"
	}
	body := map[string]any{"address": in.address}
	if in.port >= 0 {
		body["port"] = in.port
	}
	if in.sslPort >= 0 {
		body["sslPort"] = in.sslPort
	}
	if in.payload != "" {
		body["payload"] = json.RawMessage(in.payload)
	}
	if in.uriSpec != "" {
		body["uriSpec"] = in.uriSpec
	}
	return body, ""
}

// RunServiceRegister implements `coord-sidecar service register SERVICE --id
// ID --address A [flags] -- COMMAND ARGS...` (serviceRegisterUsage), with
// runHeld: the instance is registered on a kept lease before COMMAND starts
// and unregistered after it exits; a lost lease stops COMMAND and exits 76.
func RunServiceRegister(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var in instanceFlags
	var body map[string]any
	return runHeld(sig, args, getenv, stdout, stderr, heldKind{
		name: "service register", what: "the instance", usage: serviceRegisterUsage, noWait: true,
		flags: func(fs *flag.FlagSet) func() string {
			in.register(fs)
			return func() string {
				var why string
				body, why = in.body()
				return why
			}
		},
		acquire: func(ctx context.Context, c *apiClient, service string, q url.Values) (holding, error) {
			instance := "/v1/services/" + url.PathEscape(service) + "/instances/" + url.PathEscape(in.id)
			err := c.call(ctx, http.MethodPut, instance, q, body, nil) // a 400 exits 64, a 409 instance-exists 65
			return holding{release: instance, query: url.Values{"lease": q["lease"]}}, err
		},
	})
}
