package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
)

func get(t testing.TB, url, key string) time.Time {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return time.Now()
}

// A task runs (its model streams slowly); a user request arrives; the task's
// context is cancelled and its model request aborted at once; the task is
// READY_FOR_GPU again with the attempt it had; nothing runs until the idle
// threshold has passed; then it runs again and completes.
func TestUserRequestPreemptsTheRunningTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	task := e.tasks[0]
	const idle = 400 * time.Millisecond
	m := executor.NewMonitor(idle)
	url, key := e.serveAPI(t, m)
	o := newOllama(func(call int) (int, time.Duration) {
		if call == 1 {
			return 500, 10 * time.Millisecond // five seconds of answer
		}
		return 3, time.Millisecond
	})
	e.run(t, m, e.agent(t, o))

	select {
	case <-o.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor never called the model")
	}
	running := e.waitTask(t, task.ID, time.Second, func(tk store.Task) bool { return tk.State == store.TaskExecution })
	sent := time.Now()
	get(t, url+"/api/v1/tasks/"+task.ID, key)
	select {
	case at := <-o.aborted:
		if d := at.Sub(sent); d > time.Second {
			t.Fatalf("the model request was aborted %s after the user request", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the model request was not aborted")
	}
	back := e.waitTask(t, task.ID, idle/2, func(tk store.Task) bool { return tk.State == store.TaskReadyForGPU })
	if back.Attempts != running.Attempts-1 {
		t.Fatalf("attempts: %d while running, %d after preemption; the claim's attempt must be given back", running.Attempts, back.Attempts)
	}
	done := e.waitTask(t, task.ID, 10*time.Second, func(tk store.Task) bool { return tk.State == store.TaskCompleted })
	if done.Attempts != running.Attempts {
		t.Fatalf("attempts after completing: %d, want %d", done.Attempts, running.Attempts)
	}
	runs := e.runs(t)
	if len(runs) != 2 || runs[0].Outcome != "preempted" || runs[1].Outcome != "completed" {
		t.Fatalf("runs: %+v", runs)
	}
	if runs[0].Stopped.After(time.Now()) || runs[0].Stopped.Before(sent) {
		t.Fatalf("the preempted run stopped at %s, the request was sent at %s", runs[0].Stopped, sent)
	}
	if gap := runs[1].Started.Sub(sent); gap < idle {
		t.Fatalf("the task ran again %s after the user request; the idle threshold is %s", gap, idle)
	}
	var out executor.Output
	if err := json.Unmarshal(done.Result, &out); err != nil || out.Workflow != "agent" || strings.TrimSpace(out.Text) != "word word word" ||
		out.ResultNode != "result:"+task.ID {
		t.Fatalf("result %s: %v", done.Result, err)
	}
	if done.Usage.ModelCalls != 1 || done.Usage.OutputTokens != 3 {
		t.Fatalf("usage of the completed run: %+v", done.Usage)
	}
	if m.Preemptions() != 1 {
		t.Fatalf("%d preemptions", m.Preemptions())
	}
}

// recorder is the API's tracker: it notes when each user request was
// active, from just after it was registered to just before it ends.
type recorder struct {
	m     *executor.Monitor
	mu    sync.Mutex
	spans [][2]time.Time
}

func (r *recorder) RegisterRequestStart() func() {
	end := r.m.RegisterRequestStart()
	start := time.Now()
	return func() {
		stop := time.Now()
		r.mu.Lock()
		r.spans = append(r.spans, [2]time.Time{start, stop})
		r.mu.Unlock()
		end()
	}
}

// Many short user requests at random intervals while tasks are ready: by
// the event log, no execution ever ran while a request was active; some were
// preempted, and in the end every task completed.
func TestExecutionNeverOverlapsAUserRequest(t *testing.T) {
	t.Parallel()
	const tasks = 10
	e := newEnv(t, tasks)
	m := executor.NewMonitor(15 * time.Millisecond)
	rec := &recorder{m: m}
	url, key := e.serveAPI(t, rec)
	o := newOllama(func(call int) (int, time.Duration) { return 5 + call%20, 2 * time.Millisecond })
	e.run(t, m, e.agent(t, o))

	r := rand.New(rand.NewPCG(7, 7))
	paths := []string{"/api/v1/tasks?limit=5", "/api/v1/search?query=supplier", "/api/v1/documents?limit=3", "/api/v1/tasks/" + e.tasks[0].ID}
	var users sync.WaitGroup
	for u := range 3 {
		users.Go(func() {
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
				time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
				get(t, url+paths[(u+r.IntN(8))%len(paths)], key)
			}
		})
	}
	users.Wait()
	for _, tk := range e.tasks {
		e.waitTask(t, tk.ID, 30*time.Second, func(tk store.Task) bool { return tk.State == store.TaskCompleted })
	}
	runs := e.runs(t)
	preempted := 0
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, run := range runs {
		if run.Outcome == "preempted" {
			preempted++
		}
		for _, s := range rec.spans {
			if run.Started.Before(s[1]) && s[0].Before(run.Stopped) {
				t.Fatalf("a %s run [%s, %s] overlapped a user request [%s, %s]", run.Outcome,
					run.Started.Format(time.StampMicro), run.Stopped.Format(time.StampMicro), s[0].Format(time.StampMicro), s[1].Format(time.StampMicro))
			}
		}
	}
	if preempted == 0 || len(rec.spans) < 50 {
		t.Fatalf("%d runs, %d preempted, %d user requests: the test did not exercise preemption", len(runs), preempted, len(rec.spans))
	}
	t.Logf("%d user requests, %d runs, %d preempted, %d tasks completed", len(rec.spans), len(runs), preempted, tasks)
}

// The workflow agent starts from loadTaskContext, reads the graph with its
// tools (a call outside their schema is answered with the error, not run),
// and its answer becomes the task's result and a result node linked to the
// source document's node, with the text as evidence.
func TestWorkflowAgentReadsTheGraphAndStoresItsResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	task := e.tasks[0]
	o := newOllama(func(int) (int, time.Duration) { return 4, 0 })
	var main string
	o.tools = func(call int, req api.ChatRequest) []api.ToolCall {
		if call > 1 {
			return nil
		}
		var ctx struct{ Node string }
		json.Unmarshal([]byte(req.Messages[3].Content), &ctx)
		main = ctx.Node
		args := func(kv ...string) api.ToolCallFunctionArguments {
			a := api.NewToolCallFunctionArguments()
			for i := 0; i < len(kv); i += 2 {
				a.Set(kv[i], kv[i+1])
			}
			return a
		}
		return []api.ToolCall{
			{Function: api.ToolCallFunction{Name: "neighbours", Arguments: args("key", ctx.Node)}},
			{Function: api.ToolCallFunction{Name: "searchHybrid", Arguments: args("query", "frame supplier quote")}},
			{Function: api.ToolCallFunction{Name: "getNode", Arguments: args("key", "no ref")}},
			{Function: api.ToolCallFunction{Name: "deleteEverything", Arguments: args()}},
		}
	}
	m := executor.NewMonitor(time.Millisecond)
	e.run(t, m, e.agent(t, o))
	done := e.waitTask(t, task.ID, 10*time.Second, func(tk store.Task) bool { return tk.State == store.TaskCompleted })

	o.mu.Lock()
	first, second := o.requests[0], o.requests[1]
	o.mu.Unlock()
	if len(first.Tools) != 5 || first.Messages[2].ToolCalls[0].Function.Name != "loadTaskContext" ||
		!strings.Contains(first.Messages[3].Content, `"routingDecision": "READY_FOR_GPU"`) {
		t.Fatalf("first request: %d tools, messages %+v", len(first.Tools), first.Messages)
	}
	answers := map[string]string{}
	for _, msg := range second.Messages[5:] {
		answers[msg.ToolName] = msg.Content
	}
	if !strings.Contains(answers["neighbours"], "-[sent_by]->") && !strings.Contains(answers["neighbours"], "-[") ||
		!strings.Contains(answers["searchHybrid"], "Velotec") ||
		!strings.HasPrefix(answers["getNode"], "error: getNode: key") || !strings.HasPrefix(answers["deleteEverything"], "error: unknown tool") {
		t.Fatalf("tool answers:\n%v", answers)
	}
	var out executor.Output
	if err := json.Unmarshal(done.Result, &out); err != nil || out.Text != "word word word word" || out.StopReason != "answered" {
		t.Fatalf("result %s: %v", done.Result, err)
	}
	if done.Usage.ModelCalls != 2 {
		t.Fatalf("usage %+v", done.Usage)
	}
	items, err := e.KB.Related(context.Background(), client, out.ResultNode, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range items {
		if it.Content == out.ResultNode+" -[result_of]-> "+main && len(it.Evidence) == 1 && it.Evidence[0].Text == out.Text && it.Origin == "llm" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no result_of edge from %s to %s with the result as evidence: %+v", out.ResultNode, main, items)
	}
}

// The extractive workflow's digest says what is asked, of whom, by when, and
// lists related entities with their evidence.
func TestExtractiveDigest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	task := e.tasks[0]
	e.run(t, executor.NewMonitor(time.Millisecond), nil) // no workflow: extractive
	done := e.waitTask(t, task.ID, 10*time.Second, func(tk store.Task) bool { return tk.State == store.TaskCompleted })
	var out executor.Output
	if err := json.Unmarshal(done.Result, &out); err != nil || out.Workflow != "extractive" || out.Digest == nil {
		t.Fatalf("result %s: %v", done.Result, err)
	}
	d := out.Digest
	if len(d.Questions) != 1 || d.Questions[0] != "Could you decide between Velotec and Ferro Frames by Friday?" ||
		len(d.Requests) != 1 || d.Requests[0] != "Please review the quote I attached before the call." ||
		len(d.Due) != 1 || d.Due[0] != "by Friday" || !strings.HasPrefix(d.From, "Ann Novak") || len(d.AskedOf) != 1 || !strings.Contains(d.AskedOf[0], "bob.smith@acme.test") ||
		!strings.HasPrefix(d.Why, "decision asked for") {
		t.Fatalf("digest: %+v", d)
	}
	if len(d.Related) == 0 || !strings.Contains(out.Text, "Related:\n- ") || !strings.Contains(out.Text, "By when: by Friday.") {
		t.Fatalf("digest text:\n%s", out.Text)
	}
	t.Logf("digest:\n%s", out.Text)
}

func TestMonitor(t *testing.T) {
	t.Parallel()
	m := executor.NewMonitor(30 * time.Millisecond)
	if _, _, err := m.Begin(context.Background()); !errors.Is(err, executor.ErrBusy) || !errors.Is(err, worker.ErrPreempted) {
		t.Fatalf("begin before the idle threshold: %v", err)
	}
	select {
	case <-m.IdleSignal():
	case <-time.After(time.Second):
		t.Fatal("no idle signal")
	}
	ctx, w, err := m.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end := m.RegisterRequestStart()
	if !errors.Is(context.Cause(ctx), worker.ErrPreempted) {
		t.Fatalf("running work after a request: cause %v", context.Cause(ctx))
	}
	if w.End() {
		t.Fatal("End reported a preempted work as completed")
	}
	if _, _, err := m.Begin(context.Background()); !errors.Is(err, executor.ErrBusy) {
		t.Fatal("work began while a request was in flight")
	}
	end()
	end() // twice: counted once
	if m.InFlight() != 0 || m.Idle() {
		t.Fatalf("in flight %d, idle %v right after the request", m.InFlight(), m.Idle())
	}
	time.Sleep(40 * time.Millisecond)
	ctx, w, err = m.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !w.End() || ctx.Err() == nil {
		t.Fatal("a work that ended must report completion and release its context")
	}
	if started, stopped := w.Span(); !stopped.After(started) && !stopped.Equal(started) {
		t.Fatalf("span %s..%s", started, stopped)
	}
	if m.Requests() != 1 || m.Preemptions() != 1 {
		t.Fatalf("requests %d, preemptions %d", m.Requests(), m.Preemptions())
	}
}
