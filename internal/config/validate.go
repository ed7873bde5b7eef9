package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate reports every setting that cannot work, each naming its key.
// Each section checks its own keys; a connection's type and section are
// its kind's to check (pollers.Registry.Configure).
func (c Config) Validate() error {
	var p problems
	c.validateProcess(&p)
	c.Embedder.validate(&p)
	c.Graph.validate(&p)
	c.RAG.validate(&p)
	c.Store.validate(&p)
	validateConnections(c.Connections, &p)
	c.Qualifier.validate(&p)
	c.Executor.validate(&p)
	c.API.validate(&p)
	c.Indexers.validate(&p)
	return errors.Join(p...)
}

// problems collects settings errors, each naming its key.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

// validateProcess checks the process settings: where it keeps data, where it listens, its roles and its log.
func (c Config) validateProcess(p *problems) {
	if strings.TrimSpace(c.DataDir) == "" {
		p.add("data_dir", "must not be empty")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		p.add("listen", "%q is not host:port (%v)", c.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add("listen", "port %q is not 0-65535", port)
	}
	if len(c.Roles) == 0 {
		p.add("roles", "must name at least one of %s", strings.Join(Roles, ", "))
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) {
			p.add("roles", "%q is not one of %s", r, strings.Join(Roles, ", "))
		}
	}
	if _, err := c.MemoryLimitBytes(); err != nil {
		p.add("memory_limit", "%v", err)
	}
	if c.GCPercent < 10 || c.GCPercent > 1000 {
		p.add("gc_percent", "%d is not 10..1000", c.GCPercent)
	}
	if c.ShutdownTimeout <= 0 {
		p.add("shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		p.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		p.add("log.format", "%q is not text or json", c.Log.Format)
	}
}

// validate checks embedder.*.
func (s Embedder) validate(p *problems) {
	switch s.Backend {
	case "glove":
	case "ollama":
		if !isHTTPURL(s.Ollama.Host) {
			p.add("embedder.ollama.host", "%q is not an http(s) URL", s.Ollama.Host)
		}
		if strings.TrimSpace(s.Ollama.Model) == "" {
			p.add("embedder.ollama.model", "required with embedder.backend ollama")
		}
		if s.Ollama.Timeout <= 0 {
			p.add("embedder.ollama.timeout", "%s is not positive", s.Ollama.Timeout)
		}
	default:
		p.add("embedder.backend", "%q is not glove or ollama", s.Backend)
	}
	if n := s.ClientEncoder.MinDocuments; n < 0 {
		p.add("embedder.client_encoder.min_documents", "%d is negative (0: only when asked)", n)
	}
	if e := s.ClientEncoder.Every; e <= 0 {
		p.add("embedder.client_encoder.every", "%s is not positive", e)
	}
	if g := s.ClientEncoder.Growth; g != 0 && !(g > 1 && g <= 1000) {
		p.add("embedder.client_encoder.growth", "%g is not 0 (never again) or more than 1 (a retraining when the documents have grown so many times)", g)
	}
}

// validate checks graph.*.
func (s Graph) validate(p *problems) {
	switch s.Backend {
	case "sqlite":
	case "arango":
		if !isHTTPURL(s.Arango.URL) {
			p.add("graph.arango.url", "%q is not an http(s) URL (graph.backend is arango)", s.Arango.URL)
		}
		if s.Arango.Database == "" {
			p.add("graph.arango.database", "required with graph.backend arango")
		}
		if s.Arango.Timeout <= 0 {
			p.add("graph.arango.timeout", "%s is not positive", s.Arango.Timeout)
		}
	default:
		p.add("graph.backend", "%q is not sqlite or arango", s.Backend)
	}
}

// MinVectorLists is the fewest chunks rag.sqlite.vector_lists may name:
// below it a scan of every vector takes well under a millisecond.
const MinVectorLists = 10_000

// validate checks rag.*.
func (s RAG) validate(p *problems) {
	if n := s.SQLite.VectorLists; n != 0 && (n < MinVectorLists || n > math.MaxInt32) {
		p.add("rag.sqlite.vector_lists", "%d is not 0 (off) or %d..%d", n, MinVectorLists, math.MaxInt32)
	}
	switch s.Backend {
	case "sqlite":
	case "weaviate":
		if !isHTTPURL(s.Weaviate.URL) {
			p.add("rag.weaviate.url", "%q is not an http(s) URL (rag.backend is weaviate)", s.Weaviate.URL)
		}
		if g := s.Weaviate.GRPC; g != "" {
			if host, port, err := net.SplitHostPort(g); err != nil || host == "" || port == "" {
				p.add("rag.weaviate.grpc", "%q is not host:port", g)
			}
		}
		if s.Weaviate.Timeout <= 0 {
			p.add("rag.weaviate.timeout", "%s is not positive", s.Weaviate.Timeout)
		}
	default:
		p.add("rag.backend", "%q is not sqlite or weaviate", s.Backend)
	}
}

// validate checks store.*.
func (s Store) validate(p *problems) {
	switch s.Backend {
	case "sqlite":
	case "mongo":
		if u, err := url.Parse(s.Mongo.URI); err != nil || (u.Scheme != "mongodb" && u.Scheme != "mongodb+srv") {
			p.add("store.mongo.uri", "not a mongodb:// or mongodb+srv:// URI (store.backend is mongo)")
		}
		if s.Mongo.Timeout <= 0 {
			p.add("store.mongo.timeout", "%s is not positive", s.Mongo.Timeout)
		}
	default:
		p.add("store.backend", "%q is not sqlite or mongo", s.Backend)
	}
	if s.SQLite.BusyTimeout <= 0 {
		p.add("store.sqlite.busy_timeout", "must be positive, got %s", s.SQLite.BusyTimeout)
	}
}

// validateConnections checks what every connection has: a unique id, a
// client and a schedule; its type and section are its kind's to check.
func validateConnections(conns []Connection, p *problems) {
	ids := map[string]bool{}
	for i, conn := range conns {
		key := fmt.Sprintf("connections[%d]", i)
		switch {
		case conn.ID == "":
			p.add(key+".id", "required")
		case ids[conn.ID]:
			p.add(key+".id", "%q is used twice", conn.ID)
		}
		ids[conn.ID] = true
		if !clientID.MatchString(conn.Client) {
			p.add(key+".client", "%q must match %s", conn.Client, clientID)
		}
		if conn.Schedule == "" {
			p.add(key+".schedule", `required (a cron spec such as "@every 2m")`)
		} else if _, err := cronParser.Parse(conn.Schedule); err != nil {
			p.add(key+".schedule", "%q: %v", conn.Schedule, err)
		}
		if conn.Type == "" {
			p.add(key+".type", "required")
		}
		// The type and its section are the kinds' to check
		// (pollers.Registry.Configure).
	}
}

// validate checks qualifier.*.
func (s Qualifier) validate(p *problems) {
	if s.Concurrency < 1 || s.Concurrency > 256 {
		p.add("qualifier.concurrency", "%d is not 1..256", s.Concurrency)
	}
	if s.Batch < 1 || s.Batch > 1024 {
		p.add("qualifier.batch", "%d is not 1..1024", s.Batch)
	}
	if s.MaxIterations < 1 || s.MaxIterations > 100 {
		p.add("qualifier.max_iterations", "%d is not 1..100", s.MaxIterations)
	}
	switch u := s.UncertainLinks; u {
	case "auto", "record", "fetch":
	case "model":
		if s.Model == "" {
			p.add("qualifier.uncertain_links", "model needs qualifier.model")
		}
	default:
		p.add("qualifier.uncertain_links", "%q is not auto, record, fetch or model", u)
	}
	if d := s.PossibleDuplicates; d < 0 || d > 1 {
		p.add("qualifier.possible_duplicates", "%v is not 0..1 (0: none recorded)", d)
	}
}

// validate checks executor.*.
func (s Executor) validate(p *problems) {
	if s.IdleAfter < 0 {
		p.add("executor.idle_after", "%s is negative", s.IdleAfter)
	}
	if s.Concurrency < 1 || s.Concurrency > 64 {
		p.add("executor.concurrency", "%d is not 1..64", s.Concurrency)
	}
	if s.MaxIterations < 1 || s.MaxIterations > 10_000 {
		p.add("executor.max_iterations", "%d is not 1..10000", s.MaxIterations)
	}
	if s.MaxTokens < 1 {
		p.add("executor.max_tokens", "%d is not positive", s.MaxTokens)
	}
	if s.MaxDuration <= 0 {
		p.add("executor.max_duration", "%s is not positive", s.MaxDuration)
	}
}

// validate checks api.*.
func (s API) validate(p *problems) {
	if s.RateLimit < 0 {
		p.add("api.rate_limit", "%v is negative (0: no limit)", s.RateLimit)
	}
	if s.RateBurst < 1 {
		p.add("api.rate_burst", "%d is not at least 1", s.RateBurst)
	}
	if s.MaxBodyBytes < 1<<10 || s.MaxBodyBytes > 1<<30 {
		p.add("api.max_body_bytes", "%d is not 1024..1073741824", s.MaxBodyBytes)
	}
}

// validate checks indexers.*.
func (s Indexers) validate(p *problems) {
	if s.Concurrency < 1 || s.Concurrency > 256 {
		p.add("indexers.concurrency", "%d is not 1..256", s.Concurrency)
	}
	if s.BatchSize < 1 || s.BatchSize > 10_000 {
		p.add("indexers.batch_size", "%d is not 1..10000", s.BatchSize)
	}
	if s.PollInterval < 10*time.Millisecond {
		p.add("indexers.poll_interval", "%s is shorter than 10ms", s.PollInterval)
	}
}

// isHTTPURL reports whether s is an absolute http(s) URL with a host: the
// address of a server backend.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}
