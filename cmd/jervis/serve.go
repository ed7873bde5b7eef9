package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/indexers"
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
	log.Info("store open", "backend", "sqlite", "path", st.Path())

	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	api.Routes(mux, 2*time.Second, api.Check{Name: "store", Ping: st.Ping})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}

	g, gctx := errgroup.WithContext(ctx)
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
	if a.cfg.HasRole("indexers") {
		ix, err := indexers.New(st, indexers.Config{
			Concurrency: a.cfg.Indexers.Concurrency, BatchSize: a.cfg.Indexers.BatchSize,
			PollInterval: a.cfg.Indexers.PollInterval, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: log,
		})
		if err != nil {
			return err
		}
		g.Go(func() error { return ix.Run(gctx) })
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

// roleWired reports whether a role has components in this build. Health and
// readiness are served by every process whatever its roles.
func roleWired(role string) bool {
	return role == "api" || role == "indexers"
}
