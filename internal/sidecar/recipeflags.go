package sidecar

import (
	"flag"
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/api"
)

// addRecipeFlags adds flags, the recipes' own (registry.Flags: a recipe
// with settings declares them, api.Flagged), to fs like the sidecar's own:
// each also read from its environment variable (api.EnvName), the command
// line winning, and listed by --help with that variable's name. Once fs is
// parsed, the function returned checks every value (api.Flag.Check) and
// returns them by name.
func addRecipeFlags(fs *flag.FlagSet, getenv func(string) string, flags []api.Flag) func() (map[string]string, error) {
	values := make([]string, len(flags))
	for i, f := range flags {
		key := api.EnvName(f.Name)
		values[i] = env(getenv, key, f.Default)
		fs.StringVar(&values[i], f.Name, values[i], f.Usage+" ("+key+")")
	}
	return func() (map[string]string, error) {
		out := make(map[string]string, len(flags))
		for i, f := range flags {
			if f.Check != nil {
				if err := f.Check(values[i]); err != nil {
					return nil, fmt.Errorf("--%s: %w", f.Name, err)
				}
			}
			out[f.Name] = values[i]
		}
		return out, nil
	}
}
