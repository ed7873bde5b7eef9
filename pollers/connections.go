package pollers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/config"
)

// Configured connections are the configuration's connections, each checked
// by the kind that polls it.
type ConfiguredConnection struct {
	config.Connection
	Kind       Connector
	Configured Configured
}

// Configure checks every connection of the configuration with its kind —
// its type must be a kind's connection type, its only section the one of
// that name, and the kind must accept the section — and reports every
// problem at once, each naming its key. It reads no secret.
func (r *Registry) Configure(conns []config.Connection, environ []string, dataDir string) ([]ConfiguredConnection, error) {
	var errs []error
	var out []ConfiguredConnection
	for i, c := range conns {
		key := fmt.Sprintf("connections[%d]", i)
		kind, ok := r.Connector(c.Type)
		if !ok {
			errs = append(errs, fmt.Errorf("config: %s.type: %q is not one of %s", key, c.Type, strings.Join(r.ConnectionTypes(), ", ")))
			continue
		}
		var stray []string
		for name := range c.Sections {
			if name != c.Type {
				stray = append(stray, name)
			}
		}
		if len(stray) > 0 {
			slices.Sort(stray)
			errs = append(errs, fmt.Errorf("config: %s: unknown key %q (a connection of type %s has id, client, type, schedule and %s)",
				key, key+"."+stray[0], c.Type, c.Type))
			continue
		}
		s := Settings{ID: c.ID, Client: c.Client, Key: key, Section: c.Sections[c.Type], Environ: environ, DataDir: dataDir, Registry: r}
		cfg, err := kind.Configure(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ConfiguredConnection{Connection: c, Kind: kind, Configured: cfg})
	}
	return out, errors.Join(errs...)
}
