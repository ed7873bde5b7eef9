package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	jervisapi "github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

// env is the embedded stack with n READY_FOR_GPU tasks made by the real
// indexers and qualifier from e-mails that ask something.
type env struct {
	*embedded.All
	tasks []store.Task
}

const client = "acme"

func newEnv(t testing.TB, n int) env {
	t.Helper()
	all := embeddedtest.Open(t, "")
	tasks := readyTasks(t, all, n)
	return env{All: all, tasks: tasks}
}

// readyTasks stores n e-mails that ask something and runs the indexers and
// the qualifier over them: n READY_FOR_GPU tasks.
func readyTasks(t testing.TB, all *embedded.All, n int) []store.Task {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		raw := fmt.Sprintf(`From: Ann Novak <ann.novak@acme.test>
To: Bob Smith <bob.smith@acme.test>
Cc: Carol Diaz <carol.diaz@acme.test>
Subject: Supplier choice for batch %d
Message-ID: <batch-%d@acme.test>
Date: Mon, 2 Nov 2026 10:%02d:00 +0000
Content-Type: text/plain; charset=utf-8

Hi Bob,

The frame supplier for batch %d slipped again: Velotec now quotes six weeks.
Could you decide between Velotec and Ferro Frames by Friday? Ferro is 8%% dearer but ships in two.
Please review the quote I attached before the call.

Thanks,
Ann
`, i, i, i%60, i)
		docs, err := kinds.Default().Parse(fmt.Sprintf("batch-%d.eml", i), []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			d.Client = client
			if _, _, err := all.Store.PutDocument(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	pipelinetest.Drain(t, all.Store, all.KB.KB, nil)
	tasks, err := all.Store.ListTasks(ctx, store.TaskQuery{Client: client, State: store.TaskReadyForGPU, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != n {
		t.Fatalf("%d READY_FOR_GPU tasks from %d e-mails that ask something", len(tasks), n)
	}
	return tasks
}

// serveAPI serves the real API with tracker, and returns its URL and a key
// of client acme.
func (e env) serveAPI(t testing.TB, tracker interface{ RegisterRequestStart() func() }) (string, string) {
	t.Helper()
	secret, key, err := jervisapi.NewKey(store.RoleClient, client, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.CreateAPIKey(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	s := jervisapi.New(jervisapi.Config{Store: e.Store, KB: e.KB.KB, Graph: e.Graph, Chunks: e.Chunks, RateLimit: -1, Tracker: tracker})
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, secret
}

// run starts the executor; it stops when the test ends.
func (e env) run(t testing.TB, m *executor.Monitor, wf executor.Workflow) {
	t.Helper()
	x, err := executor.New(executor.Config{Store: e.Store, KB: e.KB.KB, Monitor: m, Workflow: wf, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitTask polls the task until ok accepts it.
func (e env) waitTask(t testing.TB, id string, within time.Duration, ok func(store.Task) bool) store.Task {
	t.Helper()
	var task store.Task
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		var err error
		if task, err = e.Store.GetTask(context.Background(), client, id); err != nil {
			t.Fatal(err)
		}
		if ok(task) {
			return task
		}
	}
	t.Fatalf("task %s: still %s (attempts %d) after %s", id, task.State, task.Attempts, within)
	return task
}

// runs returns the execution.run events of the client, in order.
func (e env) runs(t testing.TB) []executor.RunEvent {
	t.Helper()
	evs, err := e.Store.ListEvents(context.Background(), store.EventQuery{Client: client, Aggregate: store.AggregateTask, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	var out []executor.RunEvent
	for _, ev := range evs {
		if ev.Type == executor.EventRun {
			var r executor.RunEvent
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

// ollama speaks Ollama's /api/chat protocol, streaming its answer one word
// per chunk at the pace the script gives the call (counting from 1). A
// script may instead answer with tool calls.
type ollama struct {
	pace  func(call int) (words int, every time.Duration)
	tools func(call int, req api.ChatRequest) []api.ToolCall

	mu       sync.Mutex
	calls    int
	requests []api.ChatRequest
	arrived  chan int       // the call number, as each request arrives
	aborted  chan time.Time // when a request was cancelled before its answer ended
}

func newOllama(pace func(int) (int, time.Duration)) *ollama {
	return &ollama{pace: pace, arrived: make(chan int, 100000), aborted: make(chan time.Time, 100000)}
}

func (o *ollama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/chat" {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	var req api.ChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.calls++
	call := o.calls
	o.requests = append(o.requests, req)
	o.mu.Unlock()
	o.arrived <- call
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flush := func() { w.(http.Flusher).Flush() }
	now := func() time.Time { return time.Now().UTC() }
	if o.tools != nil {
		if tcs := o.tools(call, req); len(tcs) > 0 {
			enc.Encode(api.ChatResponse{Model: req.Model, CreatedAt: now(), Message: api.Message{Role: "assistant", ToolCalls: tcs}})
			enc.Encode(api.ChatResponse{Model: req.Model, CreatedAt: now(), Message: api.Message{Role: "assistant"}, Done: true, DoneReason: "stop",
				Metrics: api.Metrics{PromptEvalCount: 100, EvalCount: 10}})
			flush()
			return
		}
	}
	words, every := o.pace(call)
	for range words {
		select {
		case <-r.Context().Done():
			o.aborted <- time.Now()
			return
		case <-time.After(every):
		}
		enc.Encode(api.ChatResponse{Model: req.Model, CreatedAt: now(), Message: api.Message{Role: "assistant", Content: "word "}})
		flush()
	}
	enc.Encode(api.ChatResponse{Model: req.Model, CreatedAt: now(), Message: api.Message{Role: "assistant"}, Done: true, DoneReason: "stop",
		Metrics: api.Metrics{PromptEvalCount: 100, EvalCount: words}})
}

// agent returns the workflow agent talking to o.
func (e env) agent(t testing.TB, o *ollama) *executor.Agent {
	t.Helper()
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	a, err := executor.NewAgent(executor.AgentConfig{Host: srv.URL, Model: "big-model:70b", KB: e.KB.KB})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
