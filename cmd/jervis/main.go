// Command jervis is the one Jervis binary: serve runs the pipeline roles and
// the HTTP server; status reads queue depths from the store; version prints
// the build. It only wires packages together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/gctune"
	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Environ()))
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	a := &app{stdout: stdout, stderr: stderr, environ: environ}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	a.endProfile()
	if err != nil {
		fmt.Fprintln(stderr, "jervis:", a.redactor.Text(err.Error()))
		return 1
	}
	return 0
}

// app holds what every command shares: the flags, the loaded config, the
// logger.
type app struct {
	stdout, stderr io.Writer
	environ        []string

	configPath, dataDir, logLevel, logFormat string
	demo                                     bool
	server, key                              string
	cpuProfile                               string
	memProfile                               string
	traceFile                                string
	heapWritten                              bool // by bench, at the measured moment
	stopProfile                              func()

	cfg config.Config
	log *slog.Logger
	// redactor removes secrets from everything that leaves the process:
	// logs, errors, events (the configuration's secrets by value too).
	redactor *redact.Redactor
	// kinds are the source kinds of this build (pollers/kinds), and
	// connections the configured ones, each checked by its kind.
	kinds       *pollers.Registry
	connections []pollers.ConfiguredConnection
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "jervis",
		Short:         "Jervis turns a team's email, Jira, Confluence and Git into a searchable knowledge graph",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.load(cmd); err != nil {
				return err
			}
			return a.startProfile()
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.configPath, "config", "", "YAML configuration file (see deploy/jervis.example.yaml)")
	f.StringVar(&a.dataDir, "data", "", `directory of the embedded stores (default "./data")`)
	f.StringVar(&a.logLevel, "log-level", "", `debug, info, warn or error (default "info")`)
	f.StringVar(&a.logFormat, "log-format", "", `text or json (default "text")`)
	f.StringVar(&a.server, "server", "", "talk to a running server's REST API (http://host:8080) instead of the local store: search, status, reprocess")
	f.StringVar(&a.key, "key", "", "API key for --server (or set JERVIS_API_KEY)")
	f.StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof)")
	f.StringVar(&a.traceFile, "trace", "", "write an execution trace of the command to this file (go tool trace): each write transaction of an embedded store is a region named by its database and operation")
	f.StringVar(&a.memProfile, "memprofile", "", "write a heap profile to this file when the command ends (bench: after each corpus's measurements, its stores still open)")
	root.AddCommand(a.serveCommand(), a.statusCommand(), a.importCommand(), a.evalCommand(), a.benchCommand(), a.searchCommand(), a.similarCommand(), a.identitiesCommand(), a.reprocessCommand(), a.encoderCommand(), a.versionCommand())
	return root
}

// load builds the configuration (defaults < file < environment < flags),
// validates it and sets up logging.
func (a *app) load(cmd *cobra.Command) error {
	cfg, err := config.Load(a.configPath, a.environ)
	if err != nil {
		return err
	}
	flags := cmd.Flags()
	set := func(name string, dst *string, v string) {
		if flags.Changed(name) {
			*dst = v
		}
	}
	set("data", &cfg.DataDir, a.dataDir)
	set("log-level", &cfg.Log.Level, a.logLevel)
	set("log-format", &cfg.Log.Format, a.logFormat)
	applyCommandFlags(cmd, &cfg)
	if err := cfg.Validate(); err != nil {
		return err
	}
	if a.kinds == nil {
		a.kinds = kinds.Default()
	}
	if a.connections, err = a.kinds.Configure(cfg.Connections, a.environ, cfg.DataDir); err != nil {
		return err
	}
	a.cfg = cfg
	secrets, users := cfg.Secrets(a.environ)
	a.redactor = redact.New(secrets, users...)
	a.log = newLogger(a.stderr, cfg.Log, a.redactor)
	if err := sqlitedb.EngineErr(); err != nil {
		a.log.Warn("sqlite: its connections share one page cache and one allocator, and wait for each other", "err", err)
	}
	if _, set := config.LookupEnv("GOGC", a.environ); !set {
		gctune.Start(cfg.GCPercent)
	} else {
		gctune.Stop()
	}
	if limit, _ := cfg.MemoryLimitBytes(); limit > 0 { // validated
		debug.SetMemoryLimit(limit)
		a.log.Debug("memory limit", "bytes", limit)
	}
	return nil
}

// applyCommandFlags applies the flags that only some commands have.
func applyCommandFlags(cmd *cobra.Command, cfg *config.Config) {
	flags := cmd.Flags()
	if flags.Lookup("listen") != nil && flags.Changed("listen") {
		cfg.Listen, _ = flags.GetString("listen")
	}
	if flags.Lookup("roles") != nil && flags.Changed("roles") {
		roles, _ := flags.GetStringSlice("roles")
		cfg.Roles = nil
		for _, r := range roles {
			if r = strings.TrimSpace(r); r != "" {
				cfg.Roles = append(cfg.Roles, r)
			}
		}
	}
}

// newLogger returns the process's logger: every line passes through r
// (no secret is ever logged).
func newLogger(w io.Writer, c config.Log, r *redact.Redactor) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(r.Handler(h))
}

// openStore opens the configured pipeline store. With mustExist it refuses
// to create a database (read-only commands on a fresh directory).
func (a *app) openStore(ctx context.Context, mustExist bool) (store.Store, error) {
	if a.cfg.Store.Backend == "mongo" {
		m := a.cfg.Store.Mongo
		return mongo.Open(ctx, mongo.Options{URI: m.URI, Database: m.Database, Timeout: m.Timeout})
	}
	path := a.cfg.SQLitePath()
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			abs, _ := filepath.Abs(path)
			return nil, fmt.Errorf("no database at %s: nothing has run with this --data directory yet (start `jervis serve --data %s`)", abs, a.cfg.DataDir)
		}
	}
	return sqlite.Open(ctx, sqlite.Options{Path: path, BusyTimeout: a.cfg.Store.SQLite.BusyTimeout})
}
