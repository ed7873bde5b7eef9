package ollama_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb/embed/ollama"
)

// server speaks Ollama's /api/embed protocol: {"model","input":[...]} in,
// the recorded response shape out, one 4-d vector per input whose first
// component is the input's length (so order can be checked). fail, when set,
// answers instead for the first calls it chooses.
type server struct {
	calls   atomic.Int32
	batches [][]string
	fail    func(call int32, w http.ResponseWriter) bool
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := s.calls.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/api/embed" {
		http.NotFound(w, r)
		return
	}
	if s.fail != nil && s.fail(call, w) {
		return
	}
	var req struct {
		Model    string   `json:"model"`
		Input    []string `json:"input"`
		Truncate *bool    `json:"truncate"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"invalid request"}`))
		return
	}
	s.batches = append(s.batches, req.Input)
	var recorded map[string]any
	b, _ := os.ReadFile("testdata/embed_response.json")
	json.Unmarshal(b, &recorded)
	embs := make([][]float32, len(req.Input))
	for i, in := range req.Input {
		embs[i] = []float32{float32(len(in)), 0.5, -0.25, 0.125}
	}
	recorded["embeddings"], recorded["model"] = embs, req.Model
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(recorded)
}

func newEmbedder(t *testing.T, s *server, cfg ollama.Config) *ollama.Embedder {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg.Host = srv.URL
	cfg.Backoff = time.Millisecond
	e, err := ollama.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestBatchesInOrder(t *testing.T) {
	t.Parallel()
	s := &server{}
	e := newEmbedder(t, s, ollama.Config{BatchSize: 32, Model: "nomic-embed-text"})
	texts := make([]string, 70)
	for i := range texts {
		texts[i] = strings.Repeat("x", i+1)
	}
	vs, err := e.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.batches) != 3 || len(s.batches[0]) != 32 || len(s.batches[2]) != 6 {
		t.Fatalf("batches: %d", len(s.batches))
	}
	for i, v := range vs {
		if int(v[0]) != i+1 {
			t.Fatalf("vector %d belongs to input %d", i, int(v[0])-1)
		}
	}
	if e.Dimension() != 4 || e.Model() != "nomic-embed-text" {
		t.Fatalf("dim %d model %s", e.Dimension(), e.Model())
	}
}

func TestRetriesTransientErrors(t *testing.T) {
	t.Parallel()
	s := &server{fail: func(call int32, w http.ResponseWriter) bool {
		switch call {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"server busy, please try again"}`))
			return true
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"too many requests"}`))
			return true
		}
		return false
	}}
	e := newEmbedder(t, s, ollama.Config{})
	if _, err := e.Embed(t.Context(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if s.calls.Load() != 3 {
		t.Fatalf("calls %d, want 3", s.calls.Load())
	}
}

func TestGivesUpAndExplains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		code  int
		body  string
		calls int32
		want  []string
	}{
		{"model not pulled", 404, `{"error":"model \"nomic-embed-text\" not found, try pulling it first"}`, 1, []string{"ollama pull nomic-embed-text", "not found"}},
		{"bad request", 400, `{"error":"invalid input type"}`, 1, []string{"invalid input type"}},
		{"always failing", 500, `{"error":"llama runner process has terminated"}`, 4, []string{"gave up after 4 tries", "llama runner"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &server{fail: func(_ int32, w http.ResponseWriter) bool {
				w.WriteHeader(tc.code)
				w.Write([]byte(tc.body))
				return true
			}}
			e := newEmbedder(t, s, ollama.Config{})
			_, err := e.Embed(t.Context(), []string{"a"})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %q", err, w)
				}
			}
			if s.calls.Load() != tc.calls {
				t.Errorf("calls %d, want %d", s.calls.Load(), tc.calls)
			}
		})
	}
}

func TestRejectsMalformedAnswers(t *testing.T) {
	t.Parallel()
	s := &server{fail: func(_ int32, w http.ResponseWriter) bool {
		w.Write([]byte(`{"model":"m","embeddings":[[1,2,3]]}`)) // one vector for two inputs
		return true
	}}
	e := newEmbedder(t, s, ollama.Config{})
	if _, err := e.Embed(t.Context(), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "1 embeddings for 2 inputs") {
		t.Fatalf("err = %v", err)
	}
	fixed := newEmbedder(t, &server{}, ollama.Config{Dimensions: 768})
	if _, err := fixed.Embed(t.Context(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "expected 768") {
		t.Fatalf("dimension mismatch: %v", err)
	}
}

func TestCancellationStopsRetrying(t *testing.T) {
	t.Parallel()
	s := &server{fail: func(_ int32, w http.ResponseWriter) bool {
		w.WriteHeader(503)
		return true
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	e, _ := ollama.New(ollama.Config{Host: srv.URL, Backoff: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Embed(ctx, []string{"a"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := ollama.New(ollama.Config{Host: "localhost:11434"}); err == nil {
		t.Fatal("host without scheme accepted")
	}
}
