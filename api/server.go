package api

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// Config wires the REST API.
type Config struct {
	Store  store.Store
	KB     *kb.KB
	Graph  graph.Store
	Chunks rag.Store
	// MaxBodyBytes caps request bodies (default 1 MiB) but ingest's, which
	// MaxIngestBytes caps (default 24 MiB: a 16 MiB file in base64).
	MaxBodyBytes, MaxIngestBytes int64
	// RateLimit is requests per second per key on average (default 50;
	// negative: no limit), RateBurst at once (default 100).
	RateLimit float64
	RateBurst int
	// CORSOrigins may call the API from a browser ("*" for any).
	CORSOrigins []string
	// Metrics serves GET /metrics (admin keys only); nil: no route.
	Metrics http.Handler
	// PollNow asks the pollers of this process for a poll of a connection
	// (pollers.Scheduler.PollNow); nil when this process runs no pollers.
	PollNow func(connection string) error
	// Connections are the configured connections (no settings, no
	// secrets), listed by GET /admin/v1/connections.
	Connections []Connection
	// Checks are the process's backends (as /readyz checks them), reported
	// by GET /admin/v1/stats.
	Checks []Check
	// Tracker, when set, is told of every authenticated request to a
	// client or admin route (not health, metrics, the OpenAPI document or
	// the event stream): the executor yields to them.
	Tracker interface{ RegisterRequestStart() (end func()) }
	// Executor, when this process runs the executor, says whether it may
	// run now (GET /admin/v1/stats).
	Executor ExecutorMonitor
	// BaseContext bounds background work (reprocess jobs): cancel it to
	// stop them, then Wait. Default: never cancelled.
	BaseContext context.Context
	// EventPoll is how often an event stream looks for new events (default
	// 250ms); KeepAlive how long it stays silent at most (default 15s).
	EventPoll, KeepAlive time.Duration
	Logger               *slog.Logger
	// Redactor removes secrets from what leaves through the API (nil: the
	// URL rule only; see internal/redact).
	Redactor *redact.Redactor
	// Kinds read the files pushed to POST /api/v1/ingest; default: the
	// built-in kinds.
	Kinds *pollers.Registry
}

// Server is the REST API: /api/v1 for one client's key, /admin/v1 for admin
// keys.
type Server struct {
	cfg      Config
	log      *slog.Logger
	limiter  *limiter
	jobs     jobs
	patterns []string
	// training holds the clients whose encoder job is running (one at a
	// time each).
	training sync.Map
	// scheduled holds when the encoder schedule last started a job for a
	// client (EncoderSchedule.Retry).
	scheduled sync.Map

	watcher eventWatcher
}

// Patterns lists the "METHOD /path" patterns Register added (the OpenAPI
// test holds the document to them).
func (s *Server) Patterns() []string { return slices.Clone(s.patterns) }

// New returns the API.
func New(cfg Config) *Server {
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 1<<20)
	cfg.MaxIngestBytes = cmp.Or(cfg.MaxIngestBytes, 24<<20)
	cfg.RateLimit = cmp.Or(cfg.RateLimit, 50)
	cfg.RateBurst = cmp.Or(cfg.RateBurst, 100)
	if cfg.BaseContext == nil {
		cfg.BaseContext = context.Background()
	}
	cfg.EventPoll = cmp.Or(cfg.EventPoll, 250*time.Millisecond)
	cfg.KeepAlive = cmp.Or(cfg.KeepAlive, 15*time.Second)
	if cfg.Kinds == nil {
		cfg.Kinds = kinds.Default()
	}
	return &Server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), limiter: newLimiter(cfg.RateLimit, cfg.RateBurst)}
}

// handlerFunc is a route: it returns what to write, or an error.
type handlerFunc func(r *http.Request, p Principal) (any, error)

// Register adds every API route to mux.
func (s *Server) Register(mux *http.ServeMux) {
	route := func(pattern string, h http.Handler) {
		s.patterns = append(s.patterns, pattern)
		mux.Handle(pattern, h)
	}
	clientLimit := func(pattern string, h http.Handler) { route(pattern, s.cors(s.authenticate(store.RoleClient, h))) }
	client := func(pattern string, h handlerFunc) { clientLimit(pattern, s.serve(h, s.cfg.MaxBodyBytes)) }
	admin := func(pattern string, h handlerFunc) {
		route(pattern, s.cors(s.authenticate(store.RoleAdmin, s.serve(h, s.cfg.MaxBodyBytes))))
	}

	route("GET /openapi.yaml", http.HandlerFunc(serveOpenAPI))
	// The web console: static files, no key needed to load them (the page
	// asks for one and sends it to the API); not API routes.
	mux.HandleFunc("GET /{$}", serveConsole)
	mux.HandleFunc("GET /console/", serveConsole)
	client("POST /api/v1/search", s.search)
	client("GET /api/v1/search", s.search)
	client("GET /api/v1/nodes", s.nodes)
	client("GET /api/v1/nodes/{key}", s.node)
	client("GET /api/v1/nodes/{key}/neighbors", s.neighbors)
	client("GET /api/v1/nodes/{key}/aliases", s.aliases)
	client("GET /api/v1/paths", s.path)
	client("GET /api/v1/edges/{key}", s.edge)
	client("GET /api/v1/chunks/{id}", s.chunk)
	clientLimit("POST /api/v1/ingest", s.serve(s.ingest, s.cfg.MaxIngestBytes))
	client("GET /api/v1/documents", s.documents)
	client("GET /api/v1/documents/{id}", s.document)
	client("GET /api/v1/documents/{id}/similar", s.similar)
	clientLimit("GET /api/v1/events", http.HandlerFunc(s.events))
	// Every client's events, for an operator (the console's pipeline).
	route("GET /admin/v1/events", s.cors(s.authenticate(store.RoleAdmin, http.HandlerFunc(s.events))))
	client("GET /api/v1/tasks", s.tasks)
	client("GET /api/v1/tasks/{id}", s.task)

	if s.cfg.Metrics != nil {
		route("GET /metrics", s.authenticate(store.RoleAdmin, s.cfg.Metrics))
	}
	admin("GET /admin/v1/stats", s.stats)
	admin("POST /admin/v1/tasks/{id}/retry", s.taskAction(store.TaskNew))
	admin("POST /admin/v1/tasks/{id}/cancel", s.taskAction(store.TaskCancelled))
	admin("POST /admin/v1/reprocess", s.reprocess)
	admin("GET /admin/v1/connections", s.connections)
	admin("POST /admin/v1/connections/{id}/poll", s.pollNow)
	admin("GET /admin/v1/jobs", s.jobList)
	admin("GET /admin/v1/jobs/{id}", s.job)
	admin("GET /admin/v1/clients", s.clients)
	admin("POST /admin/v1/clients", s.createClient)
	admin("PUT /admin/v1/clients/{client}/namespaces", s.setNamespaces)
	admin("GET /admin/v1/clients/{client}/keys", s.keys)
	admin("POST /admin/v1/clients/{client}/keys", s.createKey)
	admin("POST /admin/v1/keys/{id}/revoke", s.revokeKey)
	admin("POST /admin/v1/clients/{client}/merges", s.identityDecision(true))
	admin("POST /admin/v1/clients/{client}/splits", s.identityDecision(false))
	admin("POST /admin/v1/clients/{client}/encoder", s.trainEncoder)
	admin("GET /admin/v1/clients/{client}/link-patterns", s.linkPatterns)
	admin("POST /admin/v1/clients/{client}/link-patterns", s.addLinkPattern)
	admin("DELETE /admin/v1/clients/{client}/link-patterns", s.removeLinkPattern)

	if len(s.cfg.CORSOrigins) > 0 {
		mux.Handle("OPTIONS /api/v1/", s.cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
		mux.Handle("OPTIONS /admin/v1/", s.cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	}
	// Anything else under the API prefixes is a JSON 404, not the mux's text.
	for _, prefix := range []string{"/api/", "/admin/"} {
		mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) { writeError(w, notFound("route "+r.URL.Path)) })
	}
}

// status is a result with its own status code.
type status struct {
	code int
	body any
}

func (s *Server) serve(h handlerFunc, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Tracker != nil {
			defer s.cfg.Tracker.RegisterRequestStart()()
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		out, err := h(r, principalOf(r.Context()))
		if err != nil {
			writeError(w, toError(err, s.log, r))
			return
		}
		if st, ok := out.(status); ok {
			if st.body == nil {
				w.WriteHeader(st.code)
				return
			}
			writeJSON(w, st.code, st.body)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.CORSOrigins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && (slices.Contains(s.cfg.CORSOrigins, "*") || slices.Contains(s.cfg.CORSOrigins, o)) {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Vary", "Origin")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			w.Header().Set("Access-Control-Max-Age", "600")
		}
		next.ServeHTTP(w, r)
	})
}

// list is the envelope of list responses; NextCursor, when set, is the
// cursor parameter that fetches the next page.
type list[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// items wraps xs, an empty list being [] and never null.
func items[T any](xs []T) list[T] {
	if xs == nil {
		xs = []T{}
	}
	return list[T]{Items: xs}
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
