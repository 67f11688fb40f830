package sidecar

import (
	"flag"
	"fmt"
	"io"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
)

// usageHead is the start of `coord-sidecar --help`; the sidecar's flags follow.
const usageHead = `usage:
  coord-sidecar [flags]                                   run the sidecar
  coord-sidecar lock NAME [flags] -- COMMAND ARGS...      run COMMAND while holding the lock NAME
  coord-sidecar elect NAME --id ID [flags] -- COMMAND...  run COMMAND only while ID leads the election NAME
  coord-sidecar elect --observe NAME                      write the leader's id now and at each change
  coord-sidecar semaphore NAME --max N -- COMMAND...      run COMMAND holding one of N permits
  coord-sidecar rwlock NAME --read|--write -- COMMAND...  run COMMAND holding the read/write lock NAME
  coord-sidecar help                                      this text

The command-line client (values to stdout as stored, problems to stderr):
%s

'coord-sidecar lock --help', 'coord-sidecar kv get --help' and so on describe
the subcommands and their flags. The subcommands find the sidecar at --addr or
COORD_ADDR: http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH; the
token comes from --token, COORD_TOKEN, --token-file or COORD_TOKEN_FILE.

flags of the sidecar (each also read from the environment variable named):
`

// printUsage writes `coord-sidecar --help`: the subcommands, then fs's flags.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, usageHead, ctl.VerbList(""))
	fs.SetOutput(w)
	fs.PrintDefaults()
}
