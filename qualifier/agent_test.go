package qualifier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/agent"
)

// chatServer answers /api/chat like Ollama: with routeTask, or (silent) with
// text and no tool call.
func chatServer(t *testing.T, silent bool, calls *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		msg := map[string]any{"role": "assistant", "content": "Nothing to add."}
		if !silent {
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{
				"name": "routeTask", "arguments": map[string]any{"decision": "READY_FOR_GPU", "reason": "Bob must approve the budget", "summary": "Ann needs Bob's approval of the Q3 budget."}}}}}
		}
		json.NewEncoder(w).Encode(map[string]any{"model": "m", "message": msg, "done": true, "prompt_eval_count": 300, "eval_count": 20})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestQualifierWithTheAgent(t *testing.T) {
	t.Parallel()
	for _, silent := range []bool{false, true} {
		e := newEnv(t)
		ctx := context.Background()
		body := strings.Repeat("The Q3 budget spreadsheet is attached for review and it needs an approval this week. ", 4)
		e.indexEmail(t, "b@acme.test", "Budget", body)
		var calls atomic.Int32
		ag, err := agent.New(agent.Config{Host: chatServer(t, silent, &calls), Model: "m", KB: e.kb})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Agent: ag, BackoffBase: 10 * time.Millisecond, PollInterval: 10 * time.Millisecond})
		runUntil(t, q, func(s store.Stats) bool {
			return s.TasksByKind["DATA_PROCESSING"]["READY_FOR_GPU"]+s.TasksByKind["DATA_PROCESSING"]["FAILED"] == 1
		}, e.st)
		docID := store.DocumentID("acme", store.SourceEmail, "b@acme.test", store.ContentHash([]byte(body)))
		task, _ := e.st.GetTask(ctx, "acme", store.TaskID(docID, store.KindData, ""))
		if !silent {
			mem, _ := e.st.GetTaskMemory(ctx, "acme", task.ID)
			if task.State != store.TaskReadyForGPU || mem.RoutingReason != "model: Bob must approve the budget" || !strings.Contains(mem.ContextSummary, "Q3 budget") ||
				task.Usage.ModelCalls != 1 || task.Usage.PromptTokens != 300 {
				t.Fatalf("agent run: task %+v usage %+v memory %+v", task.State, task.Usage, mem)
			}
			// What `jervis status` reports as model calls per document.
			if st, _ := e.st.Stats(ctx); st.ModelUsage["DATA_PROCESSING"].CallsPerTask() != 1 || int32(st.ModelUsage["DATA_PROCESSING"].ModelCalls) != calls.Load() {
				t.Fatalf("model usage %+v, server saw %d calls", st.ModelUsage, calls.Load())
			}
			continue
		}
		// Silent model: retried, then FAILED with the reason.
		if task.State != store.TaskFailed || task.LastError == nil || task.LastError.Class != qualifier.ClassEmptyExtraction || task.Attempts != task.MaxAttempts {
			t.Fatalf("silent model: %s %+v attempts %d/%d", task.State, task.LastError, task.Attempts, task.MaxAttempts)
		}
	}
}
