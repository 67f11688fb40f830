package ctl

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/coord-sidecar/coord-sidecar/api/client"
)

// The kv verbs' etcdctl and Consul options: `kv put --lease` (an ephemeral
// key) and `--version` (compare-and-set), `kv get --prefix` (every key under
// a prefix).

func kvPutFlags(fs *flag.FlagSet, v *cliValues) {
	contentTypeFlag(fs, v)
	fs.StringVar(&v.lease, "lease", "", "make the key ephemeral: deleted when this lease ends")
	fs.StringVar(&v.version, "version", "", "compare-and-set: write only if the key's version is this one (-1: only if absent); else exit 65")
}

func kvGetFlags(fs *flag.FlagSet, v *cliValues) {
	fs.Func("prefix", "every key that starts with this (\"\": every key), instead of KEY", func(s string) error {
		v.prefix, v.prefixSet = s, true
		return nil
	})
	jsonFlag(fs, v)
	pageFlag(fs, v)
}

func kvWatchFlags(fs *flag.FlagSet, v *cliValues) {
	fs.Func("prefix", "every key that starts with this (\"\": every key), instead of KEY", func(s string) error {
		v.prefix, v.prefixSet = s, true
		return nil
	})
	jsonFlag(fs, v)
}

// kvWatchCheck: kv watch takes KEY or --prefix, one of them.
func kvWatchCheck(args []string, v *cliValues) string {
	switch {
	case v.prefixSet && len(args) > 0:
		return "KEY or --prefix, not both"
	case !v.prefixSet && len(args) == 0:
		return "want KEY, or --prefix P"
	}
	return ""
}

// kvGetCheck: kv get takes KEY or --prefix, one of them (as kv watch), and
// --json only with --prefix.
func kvGetCheck(args []string, v *cliValues) string {
	if msg := kvWatchCheck(args, v); msg != "" {
		return msg
	}
	if v.json && !v.prefixSet {
		return "--json goes with --prefix"
	}
	return ""
}

// kvPutCheck: --version is a version.
func kvPutCheck(_ []string, v *cliValues) string {
	if v.version == "" {
		return ""
	}
	if n, err := strconv.ParseInt(v.version, 10, 32); err != nil || n < -1 {
		return fmt.Sprintf("--version %q is not a version (-1, 0, 1, ...)", v.version)
	}
	return ""
}

func (c *cliCall) kvPut(args []string) int {
	value, err := c.input(args, 1)
	if err != nil {
		return c.failed(err, 0, nil)
	}
	params := &client.PutKeyParams{}
	if c.v.lease != "" {
		params.Lease = &c.v.lease
	}
	if c.v.version != "" {
		n, _ := strconv.ParseInt(c.v.version, 10, 32) // kvPutCheck parsed it
		v := int32(n)
		params.Version = &v
	}
	r, err := c.api.PutKeyWithBodyWithResponse(c.sig.ctx, args[0], params, c.v.contentType, bytes.NewReader(value))
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code // a version mismatch: 409, exit 65
	}
	return 0
}

func (c *cliCall) kvGet(args []string) int {
	if c.v.prefixSet {
		return c.kvGetPrefix()
	}
	r, err := c.api.GetKeyWithResponse(c.sig.ctx, args[0], nil)
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	_, _ = c.stdout.Write(r.Body)
	return 0
}

// kvGetPrefix lists the keys under the prefix (every page) and writes each
// key with its value: a line with the key, then the value's bytes and a
// newline (as etcdctl get --prefix); with --json one line of JSON per key. A
// key deleted between the list and its read is left out.
func (c *cliCall) kvGetPrefix() int {
	params := &client.ListKeysParams{Limit: c.pageLimit()}
	if c.v.prefix != "" {
		params.Prefix = &c.v.prefix
	}
	for {
		r, err := c.api.ListKeysWithResponse(c.sig.ctx, params)
		if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
			return code
		}
		for _, k := range r.JSON200.Kv {
			if code := c.writeKeyValue(k.Key); code != 0 {
				return code
			}
		}
		if r.JSON200.Next == nil || *r.JSON200.Next == "" {
			return 0
		}
		params.After = r.JSON200.Next
	}
}

// writeKeyValue reads one key and writes it as kvGetPrefix does; 0 also
// when the key is gone.
func (c *cliCall) writeKeyValue(key string) int {
	r, err := c.api.GetKeyWithResponse(c.sig.ctx, key, nil)
	if err == nil && r.StatusCode() == http.StatusNotFound {
		return 0 // deleted since it was listed
	}
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	if !c.v.json {
		fmt.Fprintf(c.stdout, "%s\n%s\n", key, r.Body)
		return 0
	}
	s := client.KeyState{Key: key, Version: -1}
	if v, err := strconv.ParseInt(r.HTTPResponse.Header.Get("Version"), 10, 32); err == nil {
		s.Version = int32(v)
	}
	if ct := r.HTTPResponse.Header.Get("Content-Type"); ct != "" {
		s.ContentType = &ct
	}
	if utf8.Valid(r.Body) {
		value := string(r.Body)
		s.Value = &value
	} else {
		raw := r.Body
		s.ValueBase64 = &raw
	}
	b, err := json.Marshal(s)
	if err != nil {
		return c.failed(err, 0, nil)
	}
	c.jsonLine(b)
	return 0
}
