package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/llmtools"
	"github.com/jervis-dev/jervis/internal/metrics"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
	storesqlite "github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/agent"
)

func (a *app) serveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the pipeline roles and the HTTP server until SIGINT or SIGTERM",
		Long: `serve runs every role in one process by default. Split them across processes
that share one store with --roles (for example --roles=pollers,indexers on one
machine and --roles=qualifier,executor,api on another).

Every process answers GET /healthz and GET /readyz on --listen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
	cmd.Flags().String("listen", "", `HTTP address (default "127.0.0.1:8080")`)
	cmd.Flags().StringSlice("roles", nil, "roles to run: pollers,indexers,qualifier,executor,api (default all)")
	cmd.Flags().BoolVar(&a.demo, "demo", false, "import the demo corpus (Kestrel Cycles) into client demo when it has no documents yet")
	return cmd
}

func (a *app) serve(parent context.Context) error {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process the default way
	}()
	log := a.log
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	if s, ok := st.(*storesqlite.Store); ok {
		log.Info("store open", "backend", "sqlite", "path", s.Path())
	} else {
		log.Info("store open", "backend", a.cfg.Store.Backend, "server", mongo.Redact(a.cfg.Store.Mongo.URI))
	}
	if a.demo {
		if err := a.loadDemo(ctx, st); err != nil {
			return err
		}
	}

	// Build every component before starting any, so a bad setting (a missing
	// secret, an unreadable directory) stops start-up with nothing running.
	type component interface{ Run(context.Context) error }
	var components []component
	// What this process stores wakes its own workers at once.
	waking := &store.Waking{Store: st}
	var wakeIndexers, wakeQualifier store.Waker
	m := metrics.New(st.Stats, log)
	if a.cfg.HasRole("indexers") {
		ix, err := a.indexers(waking, a.cfg.Qualifier.UncertainLinks, m.ObserveJob)
		if err != nil {
			return err
		}
		wakeIndexers = ix
		components = append(components, ix)
	}
	var k *embedded.KB
	if a.cfg.HasRole("qualifier") || a.cfg.HasRole("api") || a.cfg.HasRole("executor") {
		if k, err = a.openKB(ctx, st); err != nil {
			return err
		}
		defer k.Close()
	}
	if a.cfg.HasRole("qualifier") {
		qc := qualifier.Config{Store: waking, KB: k.KB, Users: a.cfg.Qualifier.Users, Concurrency: a.cfg.Qualifier.Concurrency, Batch: a.cfg.Qualifier.Batch,
			UncertainLinks: a.cfg.Qualifier.UncertainLinks, PossibleDuplicates: a.cfg.Qualifier.PossibleDuplicates, PollInterval: a.cfg.Indexers.PollInterval, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: log, Observe: m.ObserveJob}
		if m := a.cfg.Qualifier.Model; m != "" {
			if qc.Agent, err = agent.New(agent.Config{Host: a.cfg.Qualifier.OllamaHost, Model: m, MaxIterations: a.cfg.Qualifier.MaxIterations, KB: k.KB, Cache: st}); err != nil {
				return err
			}
			log.Info("agent qualifier", "model", m, "host", a.cfg.Qualifier.OllamaHost)
		}
		ids := qualifier.NewIdentityLoop(st, k.KB, log)
		qc.OnIdentities = ids.Wake
		q, err := qualifier.New(qc)
		if err != nil {
			return err
		}
		components = append(components, q, ids)
		wakeQualifier = q
	}
	waking.Documents, waking.Tasks = wakeIndexers, wakeQualifier
	var monitor *executor.Monitor
	if a.cfg.HasRole("executor") {
		ec := a.cfg.Executor
		monitor = executor.NewMonitor(ec.IdleAfter)
		cfg := executor.Config{Store: waking, KB: k.KB, Monitor: monitor, Concurrency: ec.Concurrency, PollInterval: a.cfg.Indexers.PollInterval,
			ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: log, Observe: m.ObserveJob}
		workflow := "extractive"
		if ec.Model != "" {
			if cfg.Workflow, err = executor.NewAgent(executor.AgentConfig{Host: ec.OllamaHost, Model: ec.Model, MaxIterations: ec.MaxIterations,
				MaxTokens: ec.MaxTokens, MaxDuration: ec.MaxDuration, KB: k.KB}); err != nil {
				return err
			}
			workflow = "agent " + ec.Model
		}
		x, err := executor.New(cfg)
		if err != nil {
			return err
		}
		components = append(components, x)
		log.Info("executor", "workflow", workflow, "idle_after", monitor.IdleAfter())
		if !a.cfg.HasRole("api") {
			log.Warn("the executor runs without the api role in this process: it cannot see user requests, so it never yields to them")
		}
	}
	if ms, ok := st.(*mongo.Store); ok && (a.cfg.HasRole("indexers") || a.cfg.HasRole("qualifier")) {
		// Documents and tasks another process stores wake this one's
		// workers at once where the server has change streams.
		go func() {
			err := ms.WatchInserts(ctx, wakeOf(wakeIndexers), wakeOf(wakeQualifier))
			switch {
			case errors.Is(err, mongo.ErrNoChangeStreams):
				log.Info("no change streams on this MongoDB server (a replica set has them): idle workers poll", "every", a.cfg.Indexers.PollInterval)
			case err != nil:
				log.Warn("change stream ended; idle workers poll", "err", err, "every", a.cfg.Indexers.PollInterval)
			}
		}()
	}
	var pollNow func(string) error
	if a.cfg.HasRole("pollers") {
		sched, err := a.scheduler(waking, func(connection, outcome string, r pollers.PollResult) {
			m.ObservePoll(connection, outcome == pollers.EventPollFailed, r.Fetched, r.NewVersions)
		})
		if err != nil {
			return err
		}
		components = append(components, sched)
		pollNow = sched.PollNow
	}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	var encoders *api.Server // runs the encoder schedule: the api role's
	checks := a.backendChecks(st, k)
	api.Routes(mux, 2*time.Second, checks...)
	if a.cfg.HasRole("api") {
		if err := a.apiKeys(ctx, st, ln.Addr().String()); err != nil {
			return err
		}
		rate := a.cfg.API.RateLimit
		if rate == 0 {
			rate = -1 // no limit
		}
		ac := api.Config{Store: waking, KB: k.KB, Graph: k.Graph, Chunks: k.Chunks, Redactor: a.redactor, MaxBodyBytes: int64(a.cfg.API.MaxBodyBytes),
			RateLimit: rate, RateBurst: a.cfg.API.RateBurst, CORSOrigins: a.cfg.API.CORSOrigins, PollNow: pollNow, Connections: connectionInfo(a.cfg.Connections), Metrics: m.Handler(), BaseContext: ctx, Logger: log, Checks: checks}
		if monitor != nil { // the executor yields to this API's users
			ac.Tracker, ac.Executor = monitor, monitor
		}
		apiServer := api.New(ac)
		apiServer.Register(mux)
		defer apiServer.Wait() // reprocess jobs end with ctx, before the stores close
		encoders = apiServer
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}

	g, gctx := errgroup.WithContext(ctx)
	if k != nil && a.cfg.HasRole("api") {
		// Searches need the in-memory indexes: load them now, not at the
		// first user's search.
		g.Go(func() error {
			if err := k.Preload(gctx, log); err != nil && gctx.Err() == nil {
				log.Warn("preloading the search indexes failed; they load at first use", "err", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), a.cfg.ShutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	for _, c := range components {
		g.Go(func() error { return c.Run(gctx) })
	}
	if ce := a.cfg.Embedder.ClientEncoder; encoders != nil {
		// Also with min_documents 0: a replay left unfinished by a stopped
		// process runs again.
		g.Go(func() error {
			return encoders.RunEncoderSchedule(gctx, api.EncoderSchedule{MinDocuments: ce.MinDocuments, Growth: ce.Growth, Every: ce.Every, Retry: 10 * time.Minute})
		})
	}
	for _, role := range a.cfg.Roles {
		// Each role's components are wired here as they are built; a role with
		// none yet says so instead of pretending to run.
		if !roleWired(role) {
			log.Info("role has no components in this build yet", "role", role)
		}
	}
	log.Info("jervis serving", "addr", ln.Addr().String(), "roles", a.cfg.Roles, "data", a.cfg.DataDir)
	<-gctx.Done()
	if parent.Err() == nil && ctx.Err() != nil {
		log.Info("shutting down", "timeout", a.cfg.ShutdownTimeout)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// apiKeys makes sure an admin key exists (JERVIS_ADMIN_KEY, or one
// generated now and printed once) and, with --demo, gives client demo a new
// key printed as a ready-to-paste curl. Secrets go to stdout only, never to
// the log.
func (a *app) apiKeys(ctx context.Context, st store.Store, addr string) error {
	envKey, _ := config.LookupEnv("JERVIS_ADMIN_KEY", a.environ)
	secret, err := api.EnsureAdminKey(ctx, st, envKey)
	if err != nil {
		return err
	}
	if secret != "" {
		fmt.Fprintf(a.stdout, "Admin API key (shown once, stored hashed; set JERVIS_ADMIN_KEY to choose your own):\n  %s\n", secret)
	}
	if !a.demo {
		return nil
	}
	secret, err = api.IssueClientKey(ctx, st, store.Client{ID: importer.DemoClient, Name: "Kestrel Cycles (demo)"}, "serve --demo")
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Demo API key for client %s (new at each --demo start):\n  curl -s -H 'Authorization: Bearer %s' 'http://%s/api/v1/search?query=battery+range'\n"+
		"The console: http://%s/ (sign in with that key, or the admin key)\n", importer.DemoClient, secret, addr, addr)
	return nil
}

// backendChecks are the checks of the process's backends, named
// role:backend: /readyz runs them, GET /admin/v1/stats and jervis status
// report them. k may be nil (a process without the knowledge base).
func (a *app) backendChecks(st interface{ Ping(context.Context) error }, k *embedded.KB) []api.Check {
	checks := []api.Check{{Name: "store:" + a.cfg.Store.Backend, Ping: st.Ping}}
	if k == nil {
		return checks
	}
	checks = append(checks, api.Check{Name: "graph:" + a.cfg.Graph.Backend, Ping: k.Graph.Ping}, api.Check{Name: "chunks:" + a.cfg.RAG.Backend, Ping: k.Chunks.Ping})
	return append(append(checks, a.embedderCheck(k.Embedder)), a.llmChecks()...)
}

// llmChecks check the Ollama servers of the configured models (the
// qualifier's and the executor's) for the roles this process runs; none
// when no model is configured (llm: none, the rules and the extractive
// digest).
func (a *app) llmChecks() []api.Check {
	var checks []api.Check
	for _, m := range []struct {
		role, model, host string
	}{
		{"qualifier", a.cfg.Qualifier.Model, a.cfg.Qualifier.OllamaHost},
		{"executor", a.cfg.Executor.Model, a.cfg.Executor.OllamaHost},
	} {
		if m.model == "" || !a.cfg.HasRole(m.role) {
			continue
		}
		c, err := llmtools.Client(m.host, nil)
		checks = append(checks, api.Check{Name: "llm:ollama(" + m.role + ")", Ping: func(ctx context.Context) error {
			bad := err
			if bad == nil {
				bad = c.Heartbeat(ctx)
			}
			if bad != nil {
				return fmt.Errorf("ollama %s (%s): %w", m.host, m.model, bad)
			}
			return nil
		}})
	}
	return checks
}

// embedderCheck pings the embedder when it is a server (one compiled in is
// always there).
func (a *app) embedderCheck(e any) api.Check {
	c := api.Check{Name: "embedder:" + a.cfg.Embedder.Backend, Ping: func(context.Context) error { return nil }}
	if p, ok := e.(interface{ Ping(context.Context) error }); ok {
		c.Ping = p.Ping
	}
	return c
}

// roleWired reports whether a role has components in this build. Health and
// readiness are served by every process whatever its roles.
func roleWired(role string) bool {
	return slices.Contains(config.Roles, role)
}

// scheduler builds the configured connections' sources, each by its
// kind. Secrets are read here, from the environment or files, and go
// nowhere but the source.
func (a *app) scheduler(st pollers.Store, observe func(string, string, pollers.PollResult)) (*pollers.Scheduler, error) {
	var conns []pollers.Connection
	for _, c := range a.connections {
		src, err := c.Configured.NewSource()
		if err != nil {
			return nil, fmt.Errorf("connection %s: %w", c.ID, err)
		}
		conns = append(conns, pollers.Connection{ID: c.ID, Client: c.Client, SourceType: c.Kind.About().SourceType, Schedule: c.Schedule, Source: src})
		a.log.Info("connection scheduled", "connection", c.ID, "client", c.Client, "type", c.Type, "schedule", c.Schedule)
	}
	if len(conns) == 0 {
		a.log.Info("no connections configured; the pollers role has nothing to poll (see connections in deploy/jervis.example.yaml)")
	}
	return pollers.NewScheduler(pollers.Config{Store: st, Logger: a.log, Observe: observe, Redact: a.redactor.Text}, conns...)
}

// connectionInfo is what the API lists of the configured connections:
// never their settings, which may name secrets.
func connectionInfo(cs []config.Connection) []api.Connection {
	out := make([]api.Connection, len(cs))
	for i, c := range cs {
		out[i] = api.Connection{ID: c.ID, Client: c.Client, Type: c.Type, Schedule: c.Schedule}
	}
	return out
}

// wakeOf is w's Wake, or nothing when there is no w.
func wakeOf(w store.Waker) func() {
	if w == nil {
		return func() {}
	}
	return w.Wake
}
