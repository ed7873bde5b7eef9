package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/internal/worker"
)

func TestMain(m *testing.M) {
	if runCrashChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

func openStore(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), sqlite.FileName)
	}
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func enqueue(t testing.TB, s store.Tasks, n int, prefix string) {
	t.Helper()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		batch := make([]store.Task, 0, chunk)
		for j := i; j < min(n, i+chunk); j++ {
			batch = append(batch, store.Task{Kind: store.KindData, Client: "acme", SourceDoc: fmt.Sprintf("%s-%d", prefix, j), MaxAttempts: 5})
		}
		if _, err := s.EnqueueTasks(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
	}
}

// runUntil runs workers until cond holds (checked every 10ms) or the
// deadline passes, then stops them and waits for Run to return.
func runUntil(t *testing.T, cond func() bool, ws ...interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !cond() {
		t.Fatal("condition not reached before the deadline")
	}
}

func stats(t *testing.T, s store.Store) store.Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func fastConfig(name string) worker.Config {
	return worker.Config{
		Name: name, Concurrency: 16, BatchSize: 64, LeaseFor: 5 * time.Second,
		PollInterval: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
}

func TestEightWorkersTenThousandTasksExactlyOnce(t *testing.T) {
	s := openStore(t, "")
	const n = 10_000
	enqueue(t, s, n, "doc")
	var mu sync.Mutex
	handled := map[string]int{}
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		mu.Lock()
		handled[j.ID]++
		mu.Unlock()
		return worker.Result{}, nil
	})
	var ws []interface{ Run(context.Context) error }
	for i := range 8 {
		w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, fastConfig(fmt.Sprint("q", i)))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	runUntil(t, func() bool { return stats(t, s).Tasks["DONE"] == n }, ws...)

	mu.Lock()
	defer mu.Unlock()
	if len(handled) != n {
		t.Fatalf("handled %d distinct tasks, want %d", len(handled), n)
	}
	for id, c := range handled {
		if c != 1 {
			t.Fatalf("task %s handled %d times", id, c)
		}
	}
	st := stats(t, s)
	if st.Tasks["DONE"] != n || st.Tasks["NEW"] != 0 || st.Tasks["QUALIFICATION_IN_PROGRESS"] != 0 {
		t.Fatalf("final states: %+v", st.Tasks)
	}
}

func TestTransientRetriesThenSucceedsWithBoundedBackoff(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 1, "flaky")
	var calls atomic.Int32
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		if calls.Add(1) <= 2 {
			return worker.Result{}, errors.New("upstream timeout")
		}
		return worker.Result{Next: string(store.TaskDone)}, nil
	})
	cfg := fastConfig("retry")
	cfg.BackoffBase, cfg.BackoffMax, cfg.Jitter = 80*time.Millisecond, time.Second, 0.25
	cfg.PollInterval = 5 * time.Millisecond
	w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, func() bool { return stats(t, s).Tasks["DONE"] == 1 }, w)

	id := store.TaskID("flaky-0", store.KindData, "")
	tk, err := s.GetTask(t.Context(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != store.TaskDone || tk.Attempts != 3 || calls.Load() != 3 {
		t.Fatalf("state=%s attempts=%d calls=%d, want DONE/3/3", tk.State, tk.Attempts, calls.Load())
	}
	if tk.LastError == nil || tk.LastError.Class != worker.ClassTransient || tk.LastError.Message != "upstream timeout" {
		t.Fatalf("last error kept for the record: %+v", tk.LastError)
	}
	// From the event log: each retry's delay is within base·2^(n-1)·(1±jitter),
	// and the next claim waits for it.
	evs, err := s.ListEvents(t.Context(), store.EventQuery{AggregateID: id})
	if err != nil {
		t.Fatal(err)
	}
	var retries []store.StateChange
	var retryAt, claimAt []time.Time
	for _, e := range evs {
		var c store.StateChange
		if e.Type != store.EventTaskState || json.Unmarshal(e.Data, &c) != nil {
			continue
		}
		switch c.To {
		case string(store.TaskRetry):
			retries = append(retries, c)
			retryAt = append(retryAt, e.At)
		case string(store.TaskQualifying):
			claimAt = append(claimAt, e.At)
		}
	}
	if len(retries) != 2 || len(claimAt) != 3 {
		t.Fatalf("%d retries and %d claims, want 2 and 3", len(retries), len(claimAt))
	}
	for i, r := range retries {
		nominal := cfg.BackoffBase << i
		lo := time.Duration(float64(nominal) * (1 - cfg.Jitter))
		hi := time.Duration(float64(nominal) * (1 + cfg.Jitter))
		// The delay is computed just before the ack is written: allow the
		// write's latency on the low side.
		delay := r.RunAfter.Sub(retryAt[i])
		if delay < lo-50*time.Millisecond || delay > hi {
			t.Errorf("retry %d delay %s outside [%s, %s]", i+1, delay, lo, hi)
		}
		if gap := claimAt[i+1].Sub(r.RunAfter); gap < 0 {
			t.Errorf("retry %d claimed %s before its runAfter", i+1, -gap)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	cfg := worker.Config{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, Jitter: 0.2}.WithDefaults()
	for attempt := 1; attempt <= 10; attempt++ {
		nominal := min(cfg.BackoffBase<<(attempt-1), cfg.BackoffMax)
		for range 200 {
			d := cfg.Backoff(attempt)
			if d < time.Duration(float64(nominal)*0.8) || d > min(time.Duration(float64(nominal)*1.2), cfg.BackoffMax) {
				t.Fatalf("attempt %d: %s outside bounds around %s", attempt, d, nominal)
			}
		}
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 1, "bad")
	var calls atomic.Int32
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		calls.Add(1)
		return worker.Result{}, worker.Permanent(errors.New("payload is not JSON"))
	})
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, fastConfig("perm"))
	runUntil(t, func() bool { return stats(t, s).Tasks["FAILED"] == 1 }, w)
	tk, _ := s.GetTask(t.Context(), "acme", store.TaskID("bad-0", store.KindData, ""))
	if calls.Load() != 1 || tk.Attempts != 1 || tk.LastError == nil || tk.LastError.Class != worker.ClassPermanent ||
		tk.LastError.Recoverable || tk.LastError.Message != "payload is not JSON" {
		t.Fatalf("calls=%d task=%+v err=%+v", calls.Load(), tk, tk.LastError)
	}
}

func TestAttemptsExhaustedFailRecoverable(t *testing.T) {
	s := openStore(t, "")
	if _, err := s.EnqueueTasks(t.Context(), store.Task{Kind: store.KindData, Client: "acme", SourceDoc: "d", MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		panic("boom")
	})
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, fastConfig("exhaust"))
	runUntil(t, func() bool { return stats(t, s).Tasks["FAILED"] == 1 }, w)
	tk, _ := s.GetTask(t.Context(), "acme", store.TaskID("d", store.KindData, ""))
	if tk.Attempts != 2 || tk.LastError.Class != worker.ClassPanic || !tk.LastError.Recoverable {
		t.Fatalf("task: attempts=%d err=%+v", tk.Attempts, tk.LastError)
	}
}

func TestHandlerChoosesNextStateAndOutput(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 2, "route")
	q := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		if j.Item.SourceDoc == "route-0" {
			return worker.Result{Next: string(store.TaskReadyForGPU)}, nil
		}
		return worker.Result{Next: string(store.TaskCompleted)}, nil // not a qualify outcome
	})
	qw, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, q, fastConfig("q"))
	x := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		return worker.Result{Output: []byte(`{"digest":"done"}`)}, nil
	})
	xw, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageExecute}, x, fastConfig("x"))
	runUntil(t, func() bool { st := stats(t, s); return st.Tasks["COMPLETED"] == 1 && st.Tasks["FAILED"] == 1 }, qw, xw)
	done, _ := s.GetTask(t.Context(), "acme", store.TaskID("route-0", store.KindData, ""))
	if string(done.Result) != `{"digest":"done"}` || done.Attempts != 1 {
		t.Fatalf("completed task: result=%s attempts=%d", done.Result, done.Attempts)
	}
	bad, _ := s.GetTask(t.Context(), "acme", store.TaskID("route-1", store.KindData, ""))
	if bad.LastError == nil || bad.LastError.Class != "invalid_result" {
		t.Fatalf("bad routing: %+v", bad.LastError)
	}
}

func TestPreemptionReleasesWithoutSpendingAnAttempt(t *testing.T) {
	s := openStore(t, "")
	if _, err := s.EnqueueTasks(t.Context(), store.Task{Kind: store.KindData, Client: "acme", SourceDoc: "gpu"}); err != nil {
		t.Fatal(err)
	}
	id := store.TaskID("gpu", store.KindData, "")
	now := time.Now()
	if _, err := s.ClaimTasks(t.Context(), store.StageQualify, store.Claim{Owner: "q", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.TransitionTasks(t.Context(), []store.TaskTransition{{ID: id, From: store.TaskQualifying, To: store.TaskReadyForGPU, ResetAttempts: true}}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 10)
	var runs atomic.Int32
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return worker.Result{}, context.Cause(ctx)
		}
		return worker.Result{}, nil
	})
	cfg := fastConfig("x")
	cfg.PollInterval = time.Hour // only Wake makes it claim again
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageExecute}, h, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	<-started
	if n := w.CancelRunning(worker.ErrPreempted); n != 1 {
		t.Fatalf("cancelled %d", n)
	}
	waitFor(t, func() bool {
		tk, _ := s.GetTask(t.Context(), "acme", id)
		return tk.State == store.TaskReadyForGPU
	})
	tk, _ := s.GetTask(t.Context(), "acme", id)
	if tk.Attempts != 0 {
		t.Fatalf("preempted task spent an attempt: %d", tk.Attempts)
	}
	w.Wake()
	waitFor(t, func() bool {
		tk, _ := s.GetTask(t.Context(), "acme", id)
		return tk.State == store.TaskCompleted
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tk, _ = s.GetTask(t.Context(), "acme", id)
	if tk.Attempts != 1 {
		t.Fatalf("completed after preemption with attempts=%d, want 1", tk.Attempts)
	}
}

func TestWakeClaimsAtOnce(t *testing.T) {
	s := openStore(t, "")
	handled := make(chan string, 1)
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		handled <- j.ID
		return worker.Result{}, nil
	})
	cfg := fastConfig("wake")
	cfg.PollInterval = time.Hour
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	time.Sleep(50 * time.Millisecond) // the loop is idle now, polling hourly
	enqueue(t, s, 1, "woken")
	for range 3 {
		w.Wake() // signals coalesce and never block
	}
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not make the idle worker claim")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestHeartbeatKeepsLongJobsLeased(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 1, "long")
	var runs atomic.Int32
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		runs.Add(1)
		select {
		case <-time.After(1500 * time.Millisecond): // five leases long
		case <-ctx.Done():
			return worker.Result{}, ctx.Err()
		}
		return worker.Result{}, nil
	})
	cfg := fastConfig("long")
	cfg.LeaseFor, cfg.HeartbeatEvery, cfg.RescueEvery = 300*time.Millisecond, 80*time.Millisecond, 50*time.Millisecond
	a, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg)
	b, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg) // rescues eagerly
	runUntil(t, func() bool { return stats(t, s).Tasks["DONE"] == 1 }, a, b)
	if runs.Load() != 1 {
		t.Fatalf("long job ran %d times: its lease was not kept alive", runs.Load())
	}
}

func TestTwoPhaseShutdown(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 2, "shut")
	started := make(chan struct{}, 2)
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		started <- struct{}{}
		d := 100 * time.Millisecond // finishes within the soft timeout
		if j.Item.SourceDoc == "shut-1" {
			d = time.Hour // must be cancelled and released
		}
		select {
		case <-time.After(d):
			return worker.Result{}, nil
		case <-ctx.Done():
			return worker.Result{}, context.Cause(ctx)
		}
	})
	cfg := fastConfig("shut")
	cfg.ShutdownTimeout = 400 * time.Millisecond
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	<-started
	<-started
	stopAt := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopAt); took > 2*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	fin, _ := s.GetTask(t.Context(), "acme", store.TaskID("shut-0", store.KindData, ""))
	rel, _ := s.GetTask(t.Context(), "acme", store.TaskID("shut-1", store.KindData, ""))
	if fin.State != store.TaskDone {
		t.Fatalf("job within the soft timeout: %s", fin.State)
	}
	if rel.State != store.TaskNew || rel.Attempts != 0 || rel.LeaseOwner != "" {
		t.Fatalf("job past the soft timeout: state=%s attempts=%d owner=%q, want released", rel.State, rel.Attempts, rel.LeaseOwner)
	}
}

func TestDocumentQueueQuarantinesPermanentFailures(t *testing.T) {
	s := openStore(t, "")
	for _, body := range []string{"good", "malformed"} {
		if _, _, err := s.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: body, Raw: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	h := worker.HandlerFunc[store.Document](func(ctx context.Context, j worker.Job[store.Document]) (worker.Result, error) {
		if string(j.Item.Raw) == "malformed" {
			return worker.Result{}, worker.Classify("malformed_mime", true, false, errors.New("no boundary in multipart"))
		}
		return worker.Result{}, nil
	})
	w, _ := worker.New(store.DocumentQueue{Documents: s}, h, fastConfig("index"))
	runUntil(t, func() bool {
		st := stats(t, s)
		return st.Documents["INDEXED"] == 1 && st.Documents["QUARANTINED"] == 1
	}, w)
	d, _ := s.GetDocument(t.Context(), "acme", store.DocumentID("acme", store.SourceEmail, "malformed", store.ContentHash([]byte("malformed"))))
	if d.Error == nil || d.Error.Class != "malformed_mime" || d.Error.Recoverable {
		t.Fatalf("quarantine reason: %+v", d.Error)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// batcher handles jobs in batches by f (one call per batch), and one by one
// by f too.
type batcher struct {
	mu    sync.Mutex
	sizes []int
	f     func(j worker.Job[store.Task]) (worker.Result, error)
}

func (b *batcher) Handle(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
	return b.f(j)
}

func (b *batcher) HandleBatch(ctx context.Context, jobs []worker.Job[store.Task]) []worker.BatchResult {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(jobs))
	b.mu.Unlock()
	out := make([]worker.BatchResult, len(jobs))
	for i, j := range jobs {
		out[i].Result, out[i].Err = b.f(j)
	}
	return out
}

// With BatchJobs, a BatchHandler gets many jobs per call, every job still
// handled exactly once, and each job's outcome is its own: one job's
// permanent error fails that job only, a transient one retries it alone.
func TestBatchesHandleManyJobsPerCallEachWithItsOutcome(t *testing.T) {
	s := openStore(t, "")
	const n = 2_000
	enqueue(t, s, n, "doc")
	var mu sync.Mutex
	handled := map[string]int{}
	b := &batcher{f: func(j worker.Job[store.Task]) (worker.Result, error) {
		mu.Lock()
		handled[j.ID]++
		mu.Unlock()
		switch {
		case j.Item.SourceDoc == "doc-7":
			return worker.Result{}, worker.Permanent(errors.New("doc-7 is broken"))
		case j.Item.SourceDoc == "doc-8" && j.Attempt == 1:
			return worker.Result{}, errors.New("doc-8 met a transient failure")
		case j.Item.SourceDoc == "doc-9":
			return worker.Result{Next: string(store.TaskReadyForGPU)}, nil
		}
		return worker.Result{}, nil
	}}
	cfg := fastConfig("batches")
	cfg.Concurrency, cfg.BatchJobs = 2, 50
	w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, func() bool { st := stats(t, s); return st.Tasks["DONE"] == n-2 && st.Tasks["FAILED"] == 1 }, w)
	mu.Lock()
	defer mu.Unlock()
	for id, c := range handled {
		if want := map[bool]int{true: 2, false: 1}[id == store.TaskID("doc-8", store.KindData, "")]; c != want {
			t.Errorf("task %s handled %d times, want %d", id, c, want)
		}
	}
	if len(handled) != n {
		t.Fatalf("handled %d tasks, want %d", len(handled), n)
	}
	most := 0
	for _, size := range b.sizes {
		most = max(most, size)
	}
	if most != 50 || len(b.sizes) > n/10 {
		t.Errorf("%d calls for %d jobs, the largest %d jobs: not batched by 50", len(b.sizes), n, most)
	}
	bad, _ := s.GetTask(t.Context(), "acme", store.TaskID("doc-7", store.KindData, ""))
	if bad.Attempts != 1 || bad.LastError == nil || bad.LastError.Message != "doc-7 is broken" {
		t.Errorf("doc-7: %+v", bad)
	}
	flaky, _ := s.GetTask(t.Context(), "acme", store.TaskID("doc-8", store.KindData, ""))
	if flaky.State != store.TaskDone || flaky.Attempts != 2 {
		t.Errorf("doc-8: %s after %d attempts", flaky.State, flaky.Attempts)
	}
	if gpu, _ := s.GetTask(t.Context(), "acme", store.TaskID("doc-9", store.KindData, "")); gpu.State != store.TaskReadyForGPU {
		t.Errorf("doc-9: %s", gpu.State)
	}
}

// With MaxBatchJobs, a backlog grows the batches: each claim that came back
// full doubles the next, up to MaxBatchJobs; once a claim comes back short
// they are BatchJobs again.
func TestBacklogGrowsBatches(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 500, "backlog")
	b := &batcher{f: func(j worker.Job[store.Task]) (worker.Result, error) { return worker.Result{}, nil }}
	cfg := fastConfig("grows")
	cfg.Concurrency, cfg.BatchJobs, cfg.MaxBatchJobs = 1, 10, 40
	w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	runUntil(t, func() bool {
		done := stats(t, s).Tasks["DONE"]
		if done == 500 && sizes == nil { // the backlog is done: a few more come
			b.mu.Lock()
			sizes = slices.Clone(b.sizes)
			b.sizes = nil
			b.mu.Unlock()
			enqueue(t, s, 25, "later")
		}
		return done == 525
	}, w)
	// 10 + 20 + 40×11 = 470, then the last 30 in a claim of 40.
	if want := append([]int{10, 20}, append(slices.Repeat([]int{40}, 11), 30)...); !slices.Equal(sizes, want) {
		t.Fatalf("batches of %v, want %v", sizes, want)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if want := []int{10, 15}; !slices.Equal(b.sizes, want) {
		t.Fatalf("after the backlog, batches of %v, want %v (back to 10, then 20)", b.sizes, want)
	}
}

// A batch handler's panic retries every job of its batch, spending an
// attempt each.
func TestBatchPanicRetriesItsJobs(t *testing.T) {
	s := openStore(t, "")
	enqueue(t, s, 3, "doc")
	var calls atomic.Int32
	b := &batcher{f: func(j worker.Job[store.Task]) (worker.Result, error) { return worker.Result{}, nil }}
	h := panicky{b, &calls}
	cfg := fastConfig("panics")
	cfg.BatchJobs = 10
	w, _ := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, cfg)
	runUntil(t, func() bool { return stats(t, s).Tasks["DONE"] == 3 }, w)
	for i := range 3 {
		tk, _ := s.GetTask(t.Context(), "acme", store.TaskID(fmt.Sprint("doc-", i), store.KindData, ""))
		if tk.Attempts != 2 {
			t.Errorf("doc-%d: %d attempts, want 2 (the panic's and the next)", i, tk.Attempts)
		}
	}
}

// panicky panics on its first batch.
type panicky struct {
	*batcher
	calls *atomic.Int32
}

func (p panicky) HandleBatch(ctx context.Context, jobs []worker.Job[store.Task]) []worker.BatchResult {
	if p.calls.Add(1) == 1 {
		panic("boom")
	}
	return p.batcher.HandleBatch(ctx, jobs)
}

// WakeUrgent claims a live job into the slot kept for it while every slot
// is busy with bulk work, one job at a time and in batches: the live job
// is handled before the bulk job running ahead of it ends.
func TestUrgentJobsOvertakeBusySlots(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			s := openStore(t, "")
			enqueue(t, s, 1, "bulk")
			liveDone := make(chan struct{})
			bulkStarted := make(chan struct{}, 1)
			var overtook atomic.Bool
			b := &batcher{f: func(j worker.Job[store.Task]) (worker.Result, error) {
				if j.Item.SourceDoc == "live" {
					close(liveDone)
					return worker.Result{}, nil
				}
				bulkStarted <- struct{}{}
				select { // the bulk job holds the only slot until the live one is done
				case <-liveDone:
					overtook.Store(true)
				case <-time.After(10 * time.Second):
				}
				return worker.Result{}, nil
			}}
			cfg := fastConfig("urgent")
			cfg.Concurrency, cfg.BatchJobs, cfg.PollInterval = 1, batch, time.Hour
			w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, b, cfg)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				<-bulkStarted
				if _, err := s.EnqueueTasks(t.Context(), store.Task{Kind: store.KindData, Client: "acme", SourceDoc: "live", MaxAttempts: 5, Priority: store.PriorityLive}); err != nil {
					t.Error(err)
				}
				w.WakeUrgent()
			}()
			runUntil(t, func() bool { return stats(t, s).Tasks["DONE"] == 2 }, w)
			if !overtook.Load() {
				t.Fatal("the live job waited for the bulk job's slot")
			}
		})
	}
}
