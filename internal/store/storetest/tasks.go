package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// The tasks role: enqueueing, claims, leases, the state machine, its events
// and TaskMemory.

func testTaskEnqueue(t *testing.T, s store.Store) {
	n := must(s.EnqueueTasks(ctx(t), task("acme", "d1"), task("acme", "d2")))(t)
	if n != 2 {
		t.Fatalf("enqueued %d, want 2", n)
	}
	if n := must(s.EnqueueTasks(ctx(t), task("acme", "d1"), task("acme", "d2")))(t); n != 0 {
		t.Fatalf("re-enqueue created %d, want 0", n)
	}
	link := store.Task{Kind: store.KindLink, Client: "acme", SourceDoc: "d1", Payload: json.RawMessage(`{"url":"https://a.example/x"}`)}
	link2 := link
	link2.Payload = json.RawMessage(`{"url":"https://a.example/y"}`)
	if n := must(s.EnqueueTasks(ctx(t), link, link2, link))(t); n != 2 {
		t.Fatalf("two distinct links enqueued %d", n)
	}
	id := store.TaskID("d1", store.KindData, "")
	got := must(s.GetTask(ctx(t), "acme", id))(t)
	if got.State != store.TaskNew || got.MaxAttempts != 3 || string(got.Payload) != `{"n":1}` || got.CorrelationID == "" || got.CreatedAt.IsZero() {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := s.GetTask(ctx(t), "globex", id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another client's task: err = %v", err)
	}
	if c := eventsOf(t, s, id, store.EventTaskCreated); len(c) != 1 {
		t.Fatalf("task.created events = %d, want 1", len(c))
	}
}

// testTaskDemotion: a live task handed back as bulk (a reprocess) keeps
// that priority and waits behind the bulk enqueued before it.
func testTaskDemotion(t *testing.T, s store.Store) {
	now := time.Now()
	live, bulk := task("acme", "live"), task("acme", "bulk")
	live.Priority = store.PriorityLive
	must(s.EnqueueTasks(ctx(t), live, bulk))(t)
	// An urgent claim takes only what is above the bulk.
	urgent := claimAt(now, "q", 10)
	urgent.Urgent = true
	got := must(s.ClaimTasks(ctx(t), store.StageQualify, urgent))(t)
	if len(got) != 1 || got[0].SourceDoc != "live" || got[0].Priority != store.PriorityLive {
		t.Fatalf("urgent claim: %+v", got)
	}
	if more := must(s.ClaimTasks(ctx(t), store.StageQualify, urgent))(t); len(more) != 0 {
		t.Fatalf("a second urgent claim took bulk work: %+v", more)
	}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: got[0].ID, From: store.TaskQualifying, To: store.TaskNew, Owner: "q", Bulk: true}}); err != nil {
		t.Fatal(err)
	}
	if again := must(s.GetTask(ctx(t), "acme", got[0].ID))(t); again.Priority != store.PriorityBulk {
		t.Fatalf("demoted task has priority %d", again.Priority)
	}
}

func testTaskClaim(t *testing.T, s store.Store) {
	now := time.Now()
	low, high := task("acme", "low"), task("acme", "high")
	high.Priority = 10
	later := task("acme", "later")
	must(s.EnqueueTasks(ctx(t), low, high, later))(t)
	got := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 1)))(t)
	if len(got) != 1 || got[0].SourceDoc != "high" || got[0].State != store.TaskQualifying || got[0].Attempts != 1 {
		t.Fatalf("first claim: %+v", got)
	}
	// Nothing is READY_FOR_GPU yet.
	if ex := must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t); len(ex) != 0 {
		t.Fatalf("executor claimed %d", len(ex))
	}
	// Retry "high" one hour out: not claimable before then.
	runAfter := now.Add(time.Hour)
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: got[0].ID, From: store.TaskQualifying, To: store.TaskRetry, Owner: "q", RunAfter: runAfter, Error: &store.ErrorInfo{Class: "transient", Message: "timeout"}}}); err != nil {
		t.Fatal(err)
	}
	rest := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 10)))(t)
	if len(rest) != 2 {
		t.Fatalf("claimed %d, want the 2 without a future runAfter", len(rest))
	}
	r := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(runAfter.Add(time.Second), "q", 10)))(t)
	if len(r) != 1 || r[0].ID != got[0].ID || r[0].Attempts != 2 || r[0].LastError == nil || r[0].LastError.Message != "timeout" {
		t.Fatalf("retry claim: %+v", r)
	}
	// Route to the GPU: attempts start afresh; the executor claims it.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: r[0].ID, From: store.TaskQualifying, To: store.TaskReadyForGPU, Owner: "q", ResetAttempts: true}}); err != nil {
		t.Fatal(err)
	}
	ex := must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t)
	if len(ex) != 1 || ex[0].State != store.TaskExecution || ex[0].Attempts != 1 {
		t.Fatalf("execute claim: %+v", ex)
	}
	// Preemption hands it back without spending an attempt.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: ex[0].ID, From: store.TaskExecution, To: store.TaskReadyForGPU, Owner: "x", RefundAttempt: true, Reason: "preempted"}}); err != nil {
		t.Fatal(err)
	}
	back := must(s.GetTask(ctx(t), "acme", ex[0].ID))(t)
	if back.State != store.TaskReadyForGPU || back.Attempts != 0 || back.LeaseOwner != "" {
		t.Fatalf("preempted: state=%s attempts=%d owner=%q", back.State, back.Attempts, back.LeaseOwner)
	}
	ex = must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t)
	usage := &store.Usage{ModelCalls: 2, PromptTokens: 100}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: ex[0].ID, From: store.TaskExecution, To: store.TaskCompleted, Owner: "x", Result: json.RawMessage(`{"digest":"ok"}`), Usage: usage}}); err != nil {
		t.Fatal(err)
	}
	done := must(s.GetTask(ctx(t), "acme", ex[0].ID))(t)
	if done.State != store.TaskCompleted || string(done.Result) != `{"digest":"ok"}` || done.Usage.ModelCalls != 2 || done.Attempts != 1 {
		t.Fatalf("completed: %+v", done)
	}
	// A transition that sets no result or usage (a reprocess) keeps them,
	// and every transition keeps the payload.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: done.ID, From: store.TaskCompleted, To: store.TaskNew}}); err != nil {
		t.Fatal(err)
	}
	again := must(s.GetTask(ctx(t), "acme", done.ID))(t)
	if again.State != store.TaskNew || string(again.Result) != `{"digest":"ok"}` || again.Usage.ModelCalls != 2 || again.Usage.PromptTokens != 100 ||
		string(again.Payload) != `{"n":1}` {
		t.Fatalf("sent back: %+v", again)
	}
	if _, err := s.ClaimTasks(ctx(t), store.StageQualify, store.Claim{Owner: "", Limit: 1, Now: now, LeaseUntil: now.Add(time.Second)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim without owner: err = %v", err)
	}
}

// taskPath lists how to reach each task state from NEW.
var taskPath = map[store.TaskState][]store.TaskState{
	store.TaskNew:         nil,
	store.TaskQualifying:  {store.TaskQualifying},
	store.TaskDone:        {store.TaskQualifying, store.TaskDone},
	store.TaskReadyForGPU: {store.TaskQualifying, store.TaskReadyForGPU},
	store.TaskExecution:   {store.TaskQualifying, store.TaskReadyForGPU, store.TaskExecution},
	store.TaskCompleted:   {store.TaskQualifying, store.TaskReadyForGPU, store.TaskExecution, store.TaskCompleted},
	store.TaskRetry:       {store.TaskQualifying, store.TaskRetry},
	store.TaskFailed:      {store.TaskQualifying, store.TaskFailed},
	store.TaskCancelled:   {store.TaskCancelled},
}

func testTaskTransitions(t *testing.T, newStore NewStore) {
	for _, from := range store.TaskStates {
		for _, to := range store.TaskStates {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				s := newStore(t)
				tk := task("acme", "d")
				must(s.EnqueueTasks(ctx(t), tk))(t)
				id := store.TaskID("d", store.KindData, "")
				cur := store.TaskNew
				for _, next := range taskPath[from] {
					driveTask(t, s, id, cur, next)
					cur = next
				}
				before := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t))
				var err error
				if stage, running := store.StageOf(to); running {
					var got []store.Task
					got, err = s.ClaimTasks(ctx(t), stage, claimAt(time.Now(), "w", 1))
					if err == nil && len(got) == 0 {
						err = store.ErrIllegalTransition
					}
				} else {
					err = s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: from, To: to}})
				}
				legal := store.CanTransitionTask(from, to)
				after := must(s.GetTask(ctx(t), "acme", id))(t)
				events := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t))
				switch {
				case legal && err != nil:
					t.Fatalf("legal %s -> %s failed: %v", from, to, err)
				case legal && (after.State != to || events != before+1):
					t.Fatalf("legal %s -> %s: state %s, %d new events", from, to, after.State, events-before)
				case !legal && !errors.Is(err, store.ErrIllegalTransition):
					t.Fatalf("illegal %s -> %s: err = %v, want ErrIllegalTransition", from, to, err)
				case !legal && (after.State != from || events != before):
					t.Fatalf("illegal %s -> %s changed something: state %s, %d new events", from, to, after.State, events-before)
				}
			})
		}
	}
	t.Run("StaleFromIsConflict", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(s.EnqueueTasks(ctx(t), task("acme", "d")))(t)
		id := store.TaskID("d", store.KindData, "")
		err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: store.TaskFailed, To: store.TaskNew}})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
		// One bad item in a batch does not block the others.
		must(s.EnqueueTasks(ctx(t), task("acme", "e")))(t)
		other := store.TaskID("e", store.KindData, "")
		err = s.TransitionTasks(ctx(t), []store.TaskTransition{
			{ID: id, From: store.TaskDone, To: store.TaskNew},
			{ID: other, From: store.TaskNew, To: store.TaskCancelled},
			{ID: "missing", From: store.TaskNew, To: store.TaskCancelled},
		})
		if !errors.Is(err, store.ErrConflict) || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("batch err = %v, want ErrConflict and ErrNotFound", err)
		}
		if got := must(s.GetTask(ctx(t), "acme", other))(t); got.State != store.TaskCancelled {
			t.Fatalf("valid item in a partly bad batch: %s", got.State)
		}
	})
}

func driveTask(t *testing.T, s store.Store, id string, from, to store.TaskState) {
	t.Helper()
	if stage, running := store.StageOf(to); running {
		if got := must(s.ClaimTasks(ctx(t), stage, claimAt(time.Now(), "w", 1)))(t); len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim %s into %s: got %d", id, to, len(got))
		}
		return
	}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: from, To: to}}); err != nil {
		t.Fatal(err)
	}
}

func testTaskEvents(t *testing.T, s store.Store) {
	must(s.EnqueueTasks(ctx(t), task("acme", "d")))(t)
	id := store.TaskID("d", store.KindData, "")
	path := taskPath[store.TaskCompleted]
	cur := store.TaskNew
	for _, next := range path {
		driveTask(t, s, id, cur, next)
		cur = next
	}
	evs := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme", Aggregate: store.AggregateTask, AggregateID: id}))(t)
	var got []string
	var last int64
	for _, e := range evs {
		if e.Seq <= last {
			t.Fatalf("events out of order: seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.Type != store.EventTaskState {
			continue
		}
		var c store.StateChange
		if err := json.Unmarshal(e.Data, &c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.From+">"+c.To)
	}
	want := []string{}
	prev := store.TaskNew
	for _, next := range path {
		want = append(want, string(prev)+">"+string(next))
		prev = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("state events\n got %v\nwant %v", got, want)
	}
	if evs[0].Type != store.EventTaskCreated {
		t.Fatalf("first event %s, want %s", evs[0].Type, store.EventTaskCreated)
	}
}

func testTaskLeases(t *testing.T, s store.Store) {
	now := time.Now()
	for i := range 4 {
		tk := task("acme", fmt.Sprint("d", i))
		tk.MaxAttempts = 2
		must(s.EnqueueTasks(ctx(t), tk))(t)
	}
	got := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 4)))(t)
	keep := ids(got[:2])
	if n := must(s.ExtendTaskLeases(ctx(t), "q", keep, now.Add(time.Hour)))(t); n != 2 {
		t.Fatalf("extended %d", n)
	}
	if n := must(s.RescueTasks(ctx(t), store.StageQualify, now.Add(2*time.Minute)))(t); n != 2 {
		t.Fatalf("rescued %d, want 2", n)
	}
	for _, tk := range got[2:] {
		r := must(s.GetTask(ctx(t), "acme", tk.ID))(t)
		if r.State != store.TaskRetry || r.LastError == nil || r.LastError.Class != "lease_expired" || r.LeaseOwner != "" {
			t.Fatalf("rescued task: state=%s err=%+v", r.State, r.LastError)
		}
	}
	// Second expiry spends the last attempt: FAILED, recoverable.
	again := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now.Add(3*time.Minute), "q2", 10)))(t)
	if len(again) != 2 {
		t.Fatalf("reclaimed %d", len(again))
	}
	must(s.RescueTasks(ctx(t), store.StageQualify, now.Add(time.Hour)))(t)
	for _, tk := range again {
		r := must(s.GetTask(ctx(t), "acme", tk.ID))(t)
		if r.State != store.TaskFailed || !r.LastError.Recoverable {
			t.Fatalf("exhausted task: state=%s err=%+v", r.State, r.LastError)
		}
	}
	// The lease holder that kept its lease can still finish.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: keep[0], From: store.TaskQualifying, To: store.TaskDone, Owner: "q"}}); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentClaims: several claimers racing never get the same task.
func testConcurrentClaims(t *testing.T, s store.Store) {
	const n = 300
	batch := make([]store.Task, n)
	for i := range batch {
		batch[i] = task("acme", fmt.Sprint("c", i))
	}
	must(s.EnqueueTasks(ctx(t), batch...))(t)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			owner := fmt.Sprint("w", w)
			for {
				got, err := s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), owner, 7))
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, dup := seen[tk.ID]; dup {
						errs <- fmt.Errorf("task %s claimed by %s and %s", tk.ID, prev, owner)
					}
					seen[tk.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct tasks, want %d", len(seen), n)
	}
}

func testTaskMemory(t *testing.T, s store.Store) {
	m := store.TaskMemory{
		TaskID: "t1", CorrelationID: "c1", Client: "acme", Project: "apollo", ContextSummary: "Ann asks Bob to review PR 7 by Friday.",
		GraphNodeKeys: []string{"person:ann", "person:bob"}, RAGDocumentIDs: []string{"chunk-1"},
		StructuredData: json.RawMessage(`{"deadline":"friday"}`), RoutingDecision: store.TaskReadyForGPU,
		RoutingReason: "direct request", SourceType: store.SourceEmail, SourceID: "doc-1",
		Warnings: []string{"relation jira:A|???|jira:B left out"},
	}
	if err := s.SaveTaskMemory(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	got := must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t)
	if got.ContextSummary != m.ContextSummary || !slices.Equal(got.GraphNodeKeys, m.GraphNodeKeys) || string(got.StructuredData) != string(m.StructuredData) || got.RoutingDecision != store.TaskReadyForGPU ||
		!slices.Equal(got.Warnings, m.Warnings) {
		t.Fatalf("round trip: %+v", got)
	}
	m.ContextSummary = "updated"
	if err := s.SaveTaskMemory(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t); got.ContextSummary != "updated" {
		t.Fatalf("replace: %q", got.ContextSummary)
	}
	if _, err := s.GetTaskMemory(ctx(t), "globex", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other client read: %v", err)
	}
	hijack := m
	hijack.Client = "globex"
	if err := s.SaveTaskMemory(ctx(t), hijack); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("other client overwrite: err = %v, want ErrConflict", err)
	}
	if err := s.DeleteTaskMemory(ctx(t), "globex", "t1"); err != nil {
		t.Fatal(err)
	}
	must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t) // another client's delete did nothing
	if err := s.DeleteTaskMemory(ctx(t), "acme", "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTaskMemory(ctx(t), "acme", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeleteTaskMemory(ctx(t), "acme", "t1"); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
}

// testTaskMemories: many memories saved in one call read back as each
// saved alone would, saving them again replaces them, and another client's
// task ID in the batch is refused with ErrConflict.
func testTaskMemories(t *testing.T, s store.Store) {
	ms := []store.TaskMemory{
		{TaskID: "t1", Client: "acme", ContextSummary: "first", RoutingDecision: store.TaskDone, GraphNodeKeys: []string{"jira:a-1"}},
		{TaskID: "t2", Client: "acme", ContextSummary: "second", RoutingDecision: store.TaskReadyForGPU},
		{TaskID: "t3", Client: "globex", ContextSummary: "third", RoutingDecision: store.TaskDone},
	}
	if err := s.SaveTaskMemories(ctx(t), ms); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTaskMemories(ctx(t), nil); err != nil {
		t.Fatalf("no memories: %v", err)
	}
	for _, m := range ms {
		got := must(s.GetTaskMemory(ctx(t), m.Client, m.TaskID))(t)
		if got.ContextSummary != m.ContextSummary || got.RoutingDecision != m.RoutingDecision || !slices.Equal(got.GraphNodeKeys, m.GraphNodeKeys) {
			t.Fatalf("%s: %+v", m.TaskID, got)
		}
	}
	ms[0].ContextSummary, ms[1].ContextSummary = "first, again", "second, again"
	if err := s.SaveTaskMemories(ctx(t), ms[:2]); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetTaskMemory(ctx(t), "acme", "t2"))(t); got.ContextSummary != "second, again" {
		t.Fatalf("replaced: %q", got.ContextSummary)
	}
	hijack := store.TaskMemory{TaskID: "t3", Client: "acme", ContextSummary: "not yours", RoutingDecision: store.TaskDone}
	if err := s.SaveTaskMemories(ctx(t), []store.TaskMemory{hijack}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another client's task in a batch: %v, want ErrConflict", err)
	}
	if got := must(s.GetTaskMemory(ctx(t), "globex", "t3"))(t); got.ContextSummary != "third" {
		t.Fatalf("another client's memory overwritten: %q", got.ContextSummary)
	}
	for id, want := range map[string]int{"t1": 2, "t2": 2, "t3": 1} { // a task.memory event a save
		if got := len(eventsOf(t, s, id, store.EventTaskMemorySaved)); got != want {
			t.Errorf("%s: %d task.memory events, want %d", id, got, want)
		}
	}
	// A reprocess saves a large batch again: every memory is replaced
	// (MongoDB: one bulk write; FerretDB v1 held a connection for each
	// of its replacements and waited for ever past its pool's 100).
	var many []store.TaskMemory
	for i := range 150 {
		many = append(many, store.TaskMemory{TaskID: fmt.Sprint("r", i), Client: "acme", ContextSummary: "first", RoutingDecision: store.TaskDone})
	}
	must(0, s.SaveTaskMemories(ctx(t), many))(t)
	for i := range many {
		many[i].ContextSummary = "again"
	}
	must(0, s.SaveTaskMemories(ctx(t), many))(t)
	for _, id := range []string{"r0", "r99", "r149"} {
		if got := must(s.GetTaskMemory(ctx(t), "acme", id))(t); got.ContextSummary != "again" {
			t.Errorf("%s saved again: %q", id, got.ContextSummary)
		}
	}
}
