package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate reports the first setting that cannot work, naming its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "must not be empty")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (%v)", c.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("listen", "port %q is not 0-65535", port)
	}
	if len(c.Roles) == 0 {
		bad("roles", "must name at least one of %s", strings.Join(Roles, ", "))
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) {
			bad("roles", "%q is not one of %s", r, strings.Join(Roles, ", "))
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "%q is not text or json", c.Log.Format)
	}
	switch c.Embedder.Backend {
	case "glove":
	case "ollama":
		if !isHTTPURL(c.Embedder.Ollama.Host) {
			bad("embedder.ollama.host", "%q is not an http(s) URL", c.Embedder.Ollama.Host)
		}
		if strings.TrimSpace(c.Embedder.Ollama.Model) == "" {
			bad("embedder.ollama.model", "required with embedder.backend ollama")
		}
		if c.Embedder.Ollama.Timeout <= 0 {
			bad("embedder.ollama.timeout", "%s is not positive", c.Embedder.Ollama.Timeout)
		}
	default:
		bad("embedder.backend", "%q is not glove or ollama", c.Embedder.Backend)
	}
	switch c.Graph.Backend {
	case "sqlite":
	case "arango":
		if !isHTTPURL(c.Graph.Arango.URL) {
			bad("graph.arango.url", "%q is not an http(s) URL (graph.backend is arango)", c.Graph.Arango.URL)
		}
		if c.Graph.Arango.Database == "" {
			bad("graph.arango.database", "required with graph.backend arango")
		}
		if c.Graph.Arango.Timeout <= 0 {
			bad("graph.arango.timeout", "%s is not positive", c.Graph.Arango.Timeout)
		}
	default:
		bad("graph.backend", "%q is not sqlite or arango", c.Graph.Backend)
	}
	switch c.RAG.Backend {
	case "sqlite":
	case "weaviate":
		if !isHTTPURL(c.RAG.Weaviate.URL) {
			bad("rag.weaviate.url", "%q is not an http(s) URL (rag.backend is weaviate)", c.RAG.Weaviate.URL)
		}
		if c.RAG.Weaviate.Timeout <= 0 {
			bad("rag.weaviate.timeout", "%s is not positive", c.RAG.Weaviate.Timeout)
		}
	default:
		bad("rag.backend", "%q is not sqlite or weaviate", c.RAG.Backend)
	}
	switch c.Store.Backend {
	case "sqlite":
	case "mongo":
		if u, err := url.Parse(c.Store.Mongo.URI); err != nil || (u.Scheme != "mongodb" && u.Scheme != "mongodb+srv") {
			bad("store.mongo.uri", "not a mongodb:// or mongodb+srv:// URI (store.backend is mongo)")
		}
		if c.Store.Mongo.Timeout <= 0 {
			bad("store.mongo.timeout", "%s is not positive", c.Store.Mongo.Timeout)
		}
	default:
		bad("store.backend", "%q is not sqlite or mongo", c.Store.Backend)
	}
	if c.Store.SQLite.BusyTimeout <= 0 {
		bad("store.sqlite.busy_timeout", "must be positive, got %s", c.Store.SQLite.BusyTimeout)
	}
	ids := map[string]bool{}
	for i, conn := range c.Connections {
		key := fmt.Sprintf("connections[%d]", i)
		switch {
		case conn.ID == "":
			bad(key+".id", "required")
		case ids[conn.ID]:
			bad(key+".id", "%q is used twice", conn.ID)
		}
		ids[conn.ID] = true
		if !clientID.MatchString(conn.Client) {
			bad(key+".client", "%q must match %s", conn.Client, clientID)
		}
		if conn.Schedule == "" {
			bad(key+".schedule", `required (a cron spec such as "@every 2m")`)
		} else if _, err := cronParser.Parse(conn.Schedule); err != nil {
			bad(key+".schedule", "%q: %v", conn.Schedule, err)
		}
		if conn.Type == "" {
			bad(key+".type", "required")
		}
		// The type and its section are the kinds' to check
		// (pollers.Registry.Configure).
	}
	if c.Qualifier.Concurrency < 1 || c.Qualifier.Concurrency > 256 {
		bad("qualifier.concurrency", "%d is not 1..256", c.Qualifier.Concurrency)
	}
	if c.Qualifier.MaxIterations < 1 || c.Qualifier.MaxIterations > 100 {
		bad("qualifier.max_iterations", "%d is not 1..100", c.Qualifier.MaxIterations)
	}
	switch u := c.Qualifier.UncertainLinks; u {
	case "auto", "record", "fetch":
	case "model":
		if c.Qualifier.Model == "" {
			bad("qualifier.uncertain_links", "model needs qualifier.model")
		}
	default:
		bad("qualifier.uncertain_links", "%q is not auto, record, fetch or model", u)
	}
	if c.Executor.IdleAfter < 0 {
		bad("executor.idle_after", "%s is negative", c.Executor.IdleAfter)
	}
	if c.Executor.Concurrency < 1 || c.Executor.Concurrency > 64 {
		bad("executor.concurrency", "%d is not 1..64", c.Executor.Concurrency)
	}
	if c.Executor.MaxIterations < 1 || c.Executor.MaxIterations > 10_000 {
		bad("executor.max_iterations", "%d is not 1..10000", c.Executor.MaxIterations)
	}
	if c.Executor.MaxTokens < 1 {
		bad("executor.max_tokens", "%d is not positive", c.Executor.MaxTokens)
	}
	if c.Executor.MaxDuration <= 0 {
		bad("executor.max_duration", "%s is not positive", c.Executor.MaxDuration)
	}
	if c.API.RateLimit < 0 {
		bad("api.rate_limit", "%v is negative (0: no limit)", c.API.RateLimit)
	}
	if c.API.RateBurst < 1 {
		bad("api.rate_burst", "%d is not at least 1", c.API.RateBurst)
	}
	if c.API.MaxBodyBytes < 1<<10 || c.API.MaxBodyBytes > 1<<30 {
		bad("api.max_body_bytes", "%d is not 1024..1073741824", c.API.MaxBodyBytes)
	}
	if c.Indexers.Concurrency < 1 || c.Indexers.Concurrency > 256 {
		bad("indexers.concurrency", "%d is not 1..256", c.Indexers.Concurrency)
	}
	if c.Indexers.BatchSize < 1 || c.Indexers.BatchSize > 10_000 {
		bad("indexers.batch_size", "%d is not 1..10000", c.Indexers.BatchSize)
	}
	if c.Indexers.PollInterval < 10*time.Millisecond {
		bad("indexers.poll_interval", "%s is shorter than 10ms", c.Indexers.PollInterval)
	}
	return errors.Join(errs...)
}

// isHTTPURL reports whether s is an absolute http(s) URL with a host: the
// address of a server backend.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}
