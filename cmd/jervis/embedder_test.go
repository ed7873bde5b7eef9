package main

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/kb"
)

// embedder.backend ollama: ingest and search embed through Ollama's
// /api/embed (an httptest server speaking its protocol, with word-hash
// vectors), and the search finds what was ingested.
func TestOllamaEmbedderBackend(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.EmbedRequest
		if r.URL.Path != "/api/embed" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "test-embed" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		calls.Add(1)
		var inputs []string
		switch in := req.Input.(type) {
		case string:
			inputs = []string{in}
		case []any:
			for _, s := range in {
				inputs = append(inputs, s.(string))
			}
		}
		resp := api.EmbedResponse{Model: req.Model}
		for _, text := range inputs {
			v := make([]float32, 16)
			for _, word := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(strings.Trim(word, ".,;:!?")))
				v[h.Sum32()%16]++
			}
			resp.Embeddings = append(resp.Embeddings, v)
		}
		json.NewEncoder(w).Encode(resp)
	}))
	defer srv.Close()
	env := []string{"JERVIS_EMBEDDER_BACKEND=ollama", "JERVIS_EMBEDDER_OLLAMA_HOST=" + srv.URL, "JERVIS_EMBEDDER_OLLAMA_MODEL=test-embed"}

	data := t.TempDir()
	a := &app{cfg: config.Default()}
	a.cfg.DataDir = data
	a.cfg.Embedder.Backend, a.cfg.Embedder.Ollama.Host, a.cfg.Embedder.Ollama.Model = "ollama", srv.URL, "test-embed"
	all, err := a.openAll(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = all.Ingest(t.Context(), kb.IngestRequest{Client: "acme", MainNode: "jira:OPS-7", SourceType: "JIRA",
		Content: "Login fails after a password reset; the session cache keeps the old credentials."})
	all.Close()
	if err != nil {
		t.Fatal(err)
	}
	ingested := calls.Load()
	code, out, errOut := runCLI(t, env, "search", "--data", data, "--client", "acme", "--json", "password", "reset")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pack kb.EvidencePack
	if err := json.Unmarshal([]byte(out), &pack); err != nil || len(pack.Items) == 0 || !strings.Contains(pack.Items[0].Content, "password reset") {
		t.Fatalf("pack %+v (%v)", pack, err)
	}
	if ingested == 0 || calls.Load() <= ingested {
		t.Fatalf("embed calls: %d at ingest, %d after the search", ingested, calls.Load())
	}
}
