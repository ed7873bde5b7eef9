package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
)

func TestStatusPrintsModelUsageWhenThereIsAny(t *testing.T) {
	s := store.NewStats()
	s.AddTasks("acme", store.KindData, store.TaskDone, 4)
	var none strings.Builder
	if err := printStats(&none, s, nil); err != nil || strings.Contains(none.String(), "MODEL USAGE") {
		t.Fatalf("no model calls, yet:\n%s %v", none.String(), err)
	}
	s.ModelUsage["DATA_PROCESSING"] = store.UsageTotals{Tasks: 4, ModelCalls: 5, PromptTokens: 1600, OutputTokens: 120}
	var out strings.Builder
	if err := printStats(&out, s, nil); err != nil {
		t.Fatal(err)
	}
	var row []string
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "DATA_PROCESSING" {
			row = f
		}
	}
	if strings.Join(row, " ") != "DATA_PROCESSING 4 5 1.25 1600 120" {
		t.Fatalf("model usage row %q in:\n%s", row, out.String())
	}
}

func TestStatusPrintsWaitingAndFailures(t *testing.T) {
	s := store.NewStats()
	s.OldestWaiting["tasks.READY_FOR_GPU"] = time.Now().Add(-90 * time.Second)
	s.Failures["documents.bad_mime"] = 3
	var out strings.Builder
	if err := printStats(&out, s, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tasks.READY_FOR_GPU  1m30s", "documents.bad_mime   3 failed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
}

// jervis status checks the backends the configuration names: the store, and
// servers such as Weaviate (here one that does not answer).
func TestStatusReportsBackends(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "demo", "../../deploy/demo/jira"); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	env := []string{"JERVIS_RAG_BACKEND=weaviate", "JERVIS_RAG_WEAVIATE_URL=http://127.0.0.1:1"}
	code, out, errOut := runCLI(t, env, "status", "--data", data)
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	var store, chunks string
	for line := range strings.Lines(out) {
		switch f := strings.Fields(line); {
		case len(f) >= 3 && f[0] == "sqlite" && f[1] == "store":
			store = f[2]
		case len(f) >= 3 && f[0] == "weaviate" && f[1] == "chunks":
			chunks = f[2]
		}
	}
	if store != "ok" || chunks != "DOWN:" {
		t.Fatalf("backends store %q chunks %q in:\n%s", store, chunks, out)
	}
	// An ArangoDB graph that does not answer is reported as the graph's,
	// with its address; its password is in no output.
	arango := []string{"JERVIS_GRAPH_BACKEND=arango", "JERVIS_GRAPH_ARANGO_URL=http://127.0.0.1:1", "JERVIS_GRAPH_ARANGO_PASSWORD=s3cret-pw"}
	code, out, errOut = runCLI(t, arango, "status", "--data", data)
	if code != 0 || !regexp.MustCompile(`(?m)^arango\s+graph\s+DOWN: graph.arango.url http://127.0.0.1:1`).MatchString(out) || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("status with an unreachable ArangoDB: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, env, "status", "--data", data, "--json"); code != 0 || !strings.Contains(out, `"role": "chunks"`) || !strings.Contains(out, `"ok": false`) {
		t.Fatalf("status --json: %s", out)
	}
	// Credentials written in the servers' URLs reach no output either, nor
	// does a secret query parameter; the hosts are still named.
	withCreds := []string{"JERVIS_GRAPH_BACKEND=arango", "JERVIS_GRAPH_ARANGO_URL=http://root:arangoURLpw-123@127.0.0.1:1",
		"JERVIS_RAG_BACKEND=weaviate", "JERVIS_RAG_WEAVIATE_URL=http://u:weaviatePW-456@127.0.0.1:1/?api_key=wvKEY-789",
		"JERVIS_EMBEDDER_BACKEND=ollama", "JERVIS_EMBEDDER_OLLAMA_HOST=http://o:ollamaPW-000@127.0.0.1:1"}
	code, out, errOut = runCLI(t, withCreds, "status", "--data", data)
	for _, secret := range []string{"arangoURLpw-123", "weaviatePW-456", "wvKEY-789", "ollamaPW-000"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("%s in the status output:\n%s%s", secret, out, errOut)
		}
	}
	if !strings.Contains(out+errOut, "127.0.0.1") {
		t.Errorf("the servers are not named:\n%s%s", out, errOut)
	}
	_ = code
}

// The configured models' Ollama servers are checked for the roles that use
// them: a server that answers Ollama's heartbeat is ok, one that does not
// is reported with its host and model; no model, no check.
func TestLLMChecks(t *testing.T) {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			io.WriteString(w, "Ollama is running")
			return
		}
		http.NotFound(w, r)
	}))
	defer ollama.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	a := &app{cfg: config.Default()}
	if checks := a.llmChecks(); len(checks) != 0 {
		t.Fatalf("checks with no model: %+v", checks)
	}
	a.cfg.Qualifier.Model, a.cfg.Qualifier.OllamaHost = "qwen3:8b", ollama.URL
	a.cfg.Executor.Model, a.cfg.Executor.OllamaHost = "qwen3:30b", dead.URL
	got := map[string]error{}
	for _, c := range a.llmChecks() {
		got[c.Name] = c.Ping(t.Context())
	}
	if len(got) != 2 || got["llm:ollama(qualifier)"] != nil {
		t.Fatalf("checks: %v", got)
	}
	if err := got["llm:ollama(executor)"]; err == nil || !strings.Contains(err.Error(), dead.URL) || !strings.Contains(err.Error(), "qwen3:30b") {
		t.Fatalf("unreachable executor model: %v", err)
	}
	a.cfg.Roles = []string{"api"}
	if checks := a.llmChecks(); len(checks) != 0 {
		t.Fatalf("checks for roles this process does not run: %+v", checks)
	}
}
