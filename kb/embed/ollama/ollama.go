// Package ollama embeds texts with an Ollama server's /api/embed, through
// the official client (github.com/ollama/ollama/api): inputs are sent in
// batches; rate limits (429), server errors (5xx) and network failures are
// retried with exponential backoff; other client errors (a model that is not
// pulled, a bad request) fail at once with what to do.
package ollama

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jervis-dev/jervis/internal/llmtools"

	"github.com/ollama/ollama/api"

	"github.com/jervis-dev/jervis/kb/embed"
)

// Config configures the embedder.
type Config struct {
	Host       string        // default http://127.0.0.1:11434
	Model      string        // default nomic-embed-text
	BatchSize  int           // inputs per request (default 32)
	Retries    int           // retries per batch after the first try (default 3)
	Backoff    time.Duration // first retry delay, doubled each time (default 500ms)
	Timeout    time.Duration // per request (default 60s)
	Dimensions int           // expected vector length; 0 = learn it from the first answer
	HTTPClient *http.Client  // default: a client with Timeout
}

// Embedder is an embed.Embedder backed by Ollama. Safe for concurrent use.
type Embedder struct {
	cfg    Config
	client *api.Client
	dim    atomic.Int64
}

var _ embed.Embedder = (*Embedder)(nil)

// New returns an embedder; it does not contact the server.
func New(cfg Config) (*Embedder, error) {
	cfg.Host = cmp.Or(cfg.Host, "http://127.0.0.1:11434")
	cfg.Model = cmp.Or(cfg.Model, "nomic-embed-text")
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 32)
	cfg.Retries = cmp.Or(cfg.Retries, 3)
	cfg.Backoff = cmp.Or(cfg.Backoff, 500*time.Millisecond)
	cfg.Timeout = cmp.Or(cfg.Timeout, 60*time.Second)

	if cfg.BatchSize < 1 || cfg.Retries < 0 || cfg.Dimensions < 0 {
		return nil, errors.New("ollama: batch size must be positive, retries and dimensions not negative")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	client, err := llmtools.Client(cfg.Host, hc)
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	e := &Embedder{cfg: cfg, client: client}
	e.dim.Store(int64(cfg.Dimensions))
	return e, nil
}

// Model implements embed.Embedder.
func (e *Embedder) Model() string { return e.cfg.Model }

// Ping reports whether the server answers.
func (e *Embedder) Ping(ctx context.Context) error {
	if err := e.client.Heartbeat(ctx); err != nil {
		return fmt.Errorf("ollama %s: %w", e.cfg.Host, err)
	}
	return nil
}

// Dimension implements embed.Embedder: the configured dimension, or the one
// the server answered with (0 before the first answer).
func (e *Embedder) Dimension() int { return int(e.dim.Load()) }

// Embed implements embed.Embedder.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(len(texts), start+e.cfg.BatchSize)]
		vs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("ollama: embed inputs %d-%d with %s: %w", start, start+len(batch)-1, e.cfg.Model, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (e *Embedder) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	truncate := true
	req := &api.EmbedRequest{Model: e.cfg.Model, Input: batch, Truncate: &truncate}
	var last error
	for attempt := 0; attempt <= e.cfg.Retries; attempt++ {
		if attempt > 0 {
			d := e.cfg.Backoff << (attempt - 1)
			d = d/2 + rand.N(d/2+1)
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(d):
			}
		}
		resp, err := e.client.Embed(ctx, req)
		if err == nil {
			return e.check(resp, len(batch))
		}
		if ctx.Err() != nil {
			return nil, err
		}
		last = err
		var se api.StatusError
		if errors.As(err, &se) && !retryable(se.StatusCode) {
			if se.StatusCode == http.StatusNotFound {
				return nil, fmt.Errorf("model %q not found on the server (run `ollama pull %s`): %w", e.cfg.Model, e.cfg.Model, err)
			}
			return nil, err
		}
	}
	return nil, fmt.Errorf("gave up after %d tries: %w", e.cfg.Retries+1, last)
}

func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

func (e *Embedder) check(resp *api.EmbedResponse, n int) ([][]float32, error) {
	if len(resp.Embeddings) != n {
		return nil, fmt.Errorf("server returned %d embeddings for %d inputs", len(resp.Embeddings), n)
	}
	for i, v := range resp.Embeddings {
		if len(v) == 0 {
			return nil, fmt.Errorf("embedding %d is empty", i)
		}
		want := e.dim.Load()
		if want == 0 {
			e.dim.CompareAndSwap(0, int64(len(v)))
			want = e.dim.Load()
		}
		if int64(len(v)) != want {
			return nil, fmt.Errorf("embedding %d has %d dimensions, expected %d", i, len(v), want)
		}
	}
	return resp.Embeddings, nil
}
