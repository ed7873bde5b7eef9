// Package worker is the one claim → handle → ack loop that the indexers, the
// qualifier and the executor all run.
//
// A Worker claims jobs from a Queue in batches under a lease, runs each in
// its own goroutine (at most Concurrency at once) — or, for a BatchHandler
// with Config.BatchJobs above 1, a whole claim in one HandleBatch call —,
// extends the leases of long jobs with heartbeats, and acknowledges
// outcomes in batches:
//
//   - success: the handler's Result goes to the queue (Next picks the state);
//   - transient error: Retry after exponential backoff with jitter, until the
//     job's attempts are spent, then Failed (recoverable by a human);
//   - permanent error (Permanent, Classify): Failed at once;
//   - cancellation whose cause is ErrPreempted or ErrShutdown: Released, so
//     the queue hands the job back without spending an attempt.
//
// A job whose process died keeps its lease until it expires; Rescue, which
// the loop calls periodically, brings it back. Handlers must therefore be
// idempotent by job ID.
//
// Wake coalesces signals and makes an idle loop claim at once; WakeUrgent
// also claims live jobs (Job.Priority above 0) into one more slot while
// every slot is busy, and marks their contexts urgent (internal/urgency). Run stops in
// two phases: when its context ends it stops claiming and lets running jobs
// finish for ShutdownTimeout, then cancels them with ErrShutdown, acks what
// they return and exits.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/urgency"
)

// Job is one claimed item.
type Job[T any] struct {
	ID          string
	Attempt     int // this attempt, counting from 1
	MaxAttempts int
	// Priority, higher first: in batches, jobs of a higher priority are
	// handled (and acknowledged) before the rest of their claim. Above 0
	// the job is urgent (internal/urgency): its handler's writes go first.
	Priority int
	Item     T
}

// Outcome is what happened to a job.
type Outcome int

// Outcomes.
const (
	Succeeded Outcome = iota
	Retry
	Failed
	Released
)

func (o Outcome) String() string {
	return [...]string{"succeeded", "retry", "failed", "released"}[o]
}

// Failure describes why a job failed.
type Failure struct {
	Class       string
	Message     string
	Recoverable bool
}

// Ack is one job's outcome, as the queue must record it.
type Ack struct {
	ID       string
	Outcome  Outcome
	Next     string    // Succeeded: the state the handler chose; "" = queue default
	Output   []byte    // Succeeded: stored with the item when the queue supports it
	Usage    []byte    // Succeeded: what the job spent (JSON), when the queue records it
	Failure  *Failure  // Retry, Failed
	RunAfter time.Time // Retry: not before
	Reason   string    // Released: why
}

// Queue is the storage a Worker drives. Implementations must make each call
// atomic per item and safe to call from several workers and processes.
type Queue[T any] interface {
	// Claim leases up to limit available jobs to owner for leaseFor.
	Claim(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]Job[T], error)
	// Extend renews the owner's leases on ids for leaseFor from now.
	Extend(ctx context.Context, owner string, ids []string, leaseFor time.Duration) error
	// Ack records outcomes of jobs the owner holds. An ack for a job the owner
	// no longer holds is skipped and reported in the error.
	Ack(ctx context.Context, owner string, acks []Ack) error
	// Rescue returns jobs whose lease expired to be claimed again.
	Rescue(ctx context.Context) (int, error)
}

// UrgentQueue is a Queue that can claim only the jobs above the bulk's
// priority: what WakeUrgent's express slot claims. With a plain Queue it
// claims as Claim does.
type UrgentQueue[T any] interface {
	Queue[T]
	ClaimUrgent(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]Job[T], error)
}

// Result is what a successful handler returns.
type Result struct {
	Next   string // the state to finish in; "" = the queue's default
	Output []byte
	Usage  []byte // what the job spent, as JSON the queue understands
}

// Handler processes one job. It must return promptly when ctx is cancelled
// and must be idempotent by job ID: a job can run again after a crash.
type Handler[T any] interface {
	Handle(ctx context.Context, job Job[T]) (Result, error)
}

// BatchHandler is a Handler that can also handle many jobs in one call,
// so that their writes go together (Config.BatchJobs). It must be as
// idempotent as Handle, job by job, and say each job's outcome: one job's
// error costs only that job.
type BatchHandler[T any] interface {
	Handler[T]
	HandleBatch(ctx context.Context, jobs []Job[T]) []BatchResult
}

// BatchResult is one job's outcome of HandleBatch: a Result, or the error
// Handle would have returned.
type BatchResult struct {
	Result Result
	Err    error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc[T any] func(ctx context.Context, job Job[T]) (Result, error)

// Handle calls f.
func (f HandlerFunc[T]) Handle(ctx context.Context, job Job[T]) (Result, error) { return f(ctx, job) }

// Config tunes a Worker. Zero values take the defaults of WithDefaults.
type Config struct {
	Name        string // stage name, for logs and the owner ID
	Owner       string // lease owner ID; default name/host/pid/random
	Concurrency int    // jobs running at once (default 4)
	BatchSize   int    // most jobs per claim (default Concurrency)
	// BatchJobs, above 1 and with a BatchHandler, hands the handler up to
	// this many jobs in one HandleBatch call; Concurrency then counts
	// calls running at once, and JobTimeout holds for a call. Default 1:
	// one Handle per job.
	BatchJobs int
	// MaxBatchJobs, above BatchJobs, lets a backlog make batches larger:
	// a batch claim that came back full doubles the next one, up to this
	// many jobs, and one that did not goes back to BatchJobs (the express
	// slot always claims BatchJobs). Default BatchJobs.
	MaxBatchJobs    int
	LeaseFor        time.Duration // lease length (default 1m)
	HeartbeatEvery  time.Duration // lease renewal period (default LeaseFor/3)
	PollInterval    time.Duration // idle claim period (default 1s)
	RescueEvery     time.Duration // expired-lease sweep period (default LeaseFor/2)
	BackoffBase     time.Duration // first retry delay (default 1s)
	BackoffMax      time.Duration // longest retry delay (default 5m)
	Jitter          float64       // retry delay jitter as a fraction, 0..1 (default 0.2)
	JobTimeout      time.Duration // per-job limit; 0 = none
	ShutdownTimeout time.Duration // soft shutdown: how long running jobs may finish (default 10s)
	Logger          *slog.Logger
	// Observe, when set, is told how each job ended and how long it took
	// (metrics).
	Observe func(stage string, outcome Outcome, took time.Duration)
}

// WithDefaults returns c with every zero field defaulted.
func (c Config) WithDefaults() Config {
	c.Name = cmp.Or(c.Name, "worker")
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s/%s/%d/%04x", c.Name, host, os.Getpid(), rand.IntN(1<<16))
	}
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.BatchSize = cmp.Or(c.BatchSize, c.Concurrency)
	c.BatchJobs = cmp.Or(c.BatchJobs, 1)
	c.MaxBatchJobs = max(c.MaxBatchJobs, c.BatchJobs)
	c.LeaseFor = cmp.Or(c.LeaseFor, time.Minute)
	c.HeartbeatEvery = cmp.Or(c.HeartbeatEvery, c.LeaseFor/3)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.RescueEvery = cmp.Or(c.RescueEvery, c.LeaseFor/2)
	c.BackoffBase = cmp.Or(c.BackoffBase, time.Second)
	c.BackoffMax = cmp.Or(c.BackoffMax, 5*time.Minute)
	if c.Jitter == 0 {
		c.Jitter = 0.2
	}
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Concurrency < 1:
		return errors.New("worker: concurrency must be at least 1")
	case c.BatchSize < 1:
		return errors.New("worker: batch size must be at least 1")
	case c.BatchJobs < 1:
		return errors.New("worker: jobs per batch must be at least 1")
	case c.HeartbeatEvery >= c.LeaseFor:
		return errors.New("worker: heartbeat period must be shorter than the lease")
	case c.Jitter < 0 || c.Jitter > 1:
		return errors.New("worker: jitter must be between 0 and 1")
	case c.BackoffMax < c.BackoffBase:
		return errors.New("worker: backoff max must not be below backoff base")
	}
	return nil
}

// Backoff returns the delay before retry number attempt (1 = after the first
// failure): BackoffBase·2^(attempt-1), capped at BackoffMax, times a random
// factor in [1-Jitter, 1+Jitter], and never above BackoffMax.
func (c Config) Backoff(attempt int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.BackoffMax)
	f := 1 + c.Jitter*(2*rand.Float64()-1)
	return min(time.Duration(float64(d)*f), c.BackoffMax)
}

// Worker runs a Handler over a Queue. Create it with New; call Run once.
type Worker[T any] struct {
	cfg     Config
	queue   Queue[T]
	handler Handler[T]
	batches BatchHandler[T] // set when jobs are handled in batches
	log     *slog.Logger

	wake    chan struct{}
	urgent  chan struct{} // coalesced "jobs of a higher priority wait"
	slots   chan struct{} // one token per running job (batch)
	express chan struct{} // the one slot kept for urgent jobs
	freed   chan struct{} // coalesced "a slot came free"
	acks    chan Ack

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
}

// New returns a Worker. It fails when cfg (after defaults) is invalid.
func New[T any](q Queue[T], h Handler[T], cfg Config) (*Worker[T], error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Worker[T]{
		cfg:     cfg,
		queue:   q,
		handler: h,
		log:     cfg.Logger.With("worker", cfg.Name, "owner", cfg.Owner),
		wake:    make(chan struct{}, 1),
		urgent:  make(chan struct{}, 1),
		slots:   make(chan struct{}, cfg.Concurrency),
		express: make(chan struct{}, 1),
		freed:   make(chan struct{}, 1),
		acks:    make(chan Ack, cfg.Concurrency*cfg.MaxBatchJobs),
		running: map[string]context.CancelCauseFunc{},
	}
	if bh, ok := h.(BatchHandler[T]); ok && cfg.BatchJobs > 1 {
		w.batches = bh
	}
	return w, nil
}

// Owner returns the lease owner ID this worker claims under.
func (w *Worker[T]) Owner() string { return w.cfg.Owner }

// Wake makes an idle worker claim at once. Signals coalesce; it never blocks.
func (w *Worker[T]) Wake() { signal(w.wake) }

// WakeUrgent says jobs of a higher priority than the bulk wait (a live
// document): the worker claims at once, and when every slot is busy it
// claims them into one more slot kept for them, so that they wait for no
// running job or batch. Signals coalesce; it never blocks.
func (w *Worker[T]) WakeUrgent() {
	signal(w.urgent)
	signal(w.wake)
}

// CancelRunning cancels every running job with cause (ErrPreempted hands
// them back without spending an attempt). It returns how many it cancelled.
func (w *Worker[T]) CancelRunning(cause error) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cancel := range w.running {
		cancel(cause)
	}
	return len(w.running)
}

// Running returns how many jobs are running now.
func (w *Worker[T]) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run claims and handles jobs until ctx ends, then shuts down in two phases.
// It returns nil after a clean shutdown.
func (w *Worker[T]) Run(ctx context.Context) error {
	w.log.DebugContext(ctx, "worker started")
	// Running jobs outlive ctx for the soft shutdown period.
	jobsCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(ErrShutdown)

	var jobs sync.WaitGroup
	bg := context.WithoutCancel(ctx)
	completerDone := make(chan struct{})
	go func() { defer close(completerDone); w.complete(bg) }()
	stopHeartbeat := make(chan struct{})
	heartbeatDone := make(chan struct{})
	go func() { defer close(heartbeatDone); w.heartbeat(bg, stopHeartbeat) }()

	w.loop(ctx, jobsCtx, &jobs)

	// Phase one: stop claiming (done), let running jobs finish.
	w.log.DebugContext(bg, "worker stopping", "running", w.Running())
	finished := make(chan struct{})
	go func() { jobs.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(w.cfg.ShutdownTimeout):
		// Phase two: cancel what is left; it is released, not failed.
		w.log.InfoContext(bg, "soft shutdown timeout passed, cancelling running jobs", "running", w.Running())
		cancelJobs(ErrShutdown)
		<-finished
	}
	close(w.acks)
	<-completerDone
	close(stopHeartbeat)
	<-heartbeatDone
	w.log.DebugContext(bg, "worker stopped")
	return nil
}

// loop claims while ctx lives.
func (w *Worker[T]) loop(ctx, jobsCtx context.Context, jobs *sync.WaitGroup) {
	rescueTick := time.NewTicker(w.cfg.RescueEvery)
	defer rescueTick.Stop()
	w.rescue(ctx)
	failures := 0
	batch := w.cfg.BatchJobs // the next batch claim's size: grows with a backlog
	for ctx.Err() == nil {
		free := w.cfg.Concurrency - len(w.slots)
		if free == 0 {
			select {
			case <-ctx.Done():
			case <-w.freed:
			case <-w.urgent:
				w.claimExpress(ctx, jobsCtx, jobs)
			case <-rescueTick.C:
				w.rescue(ctx)
			}
			continue
		}
		limit := min(free, w.cfg.BatchSize)
		if w.batches != nil {
			limit = batch // one batch per claim
		}
		claimed, err := w.queue.Claim(ctx, w.cfg.Owner, limit, w.cfg.LeaseFor)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := w.cfg.Backoff(min(failures, 16))
			w.log.ErrorContext(ctx, "claim failed", "err", err, "retry_in", delay)
			sleep(ctx, delay)
			continue
		}
		failures = 0
		if w.batches != nil {
			batch = w.cfg.BatchJobs
			if len(claimed) == limit {
				batch = min(2*limit, w.cfg.MaxBatchJobs)
			}
		}
		select {
		case <-w.urgent: // this claim took the highest priorities first
		default:
		}
		w.startAll(jobsCtx, jobs, claimed, w.slots)
		if len(claimed) == limit {
			continue // there may be more waiting
		}
		timer := time.NewTimer(jitter(w.cfg.PollInterval))
		if !w.wait(ctx, w.wake, rescueTick.C, timer.C) {
			w.rescue(ctx)
		}
		timer.Stop()
	}
}

// wait blocks until a signal on c or poll, ctx ends, or the rescue ticker
// fires (then it returns false).
func (w *Worker[T]) wait(ctx context.Context, c <-chan struct{}, rescue <-chan time.Time, poll <-chan time.Time) bool {
	select {
	case <-ctx.Done():
	case <-c:
	case <-poll:
	case <-rescue:
		return false
	}
	return true
}

func (w *Worker[T]) rescue(ctx context.Context) {
	n, err := w.queue.Rescue(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.ErrorContext(ctx, "rescue failed", "err", err)
	case n > 0:
		w.log.InfoContext(ctx, "rescued jobs with expired leases", "count", n)
	}
}

// claimExpress claims into the express slot, when it is free, what is
// waiting (the highest priorities first).
func (w *Worker[T]) claimExpress(ctx, jobsCtx context.Context, jobs *sync.WaitGroup) {
	if len(w.express) > 0 {
		return // busy; the urgent jobs get the next free slot
	}
	limit := 1
	if w.batches != nil {
		limit = w.cfg.BatchJobs
	}
	claim := w.queue.Claim
	if uq, ok := w.queue.(UrgentQueue[T]); ok {
		claim = uq.ClaimUrgent
	}
	claimed, err := claim(urgency.With(ctx), w.cfg.Owner, limit, w.cfg.LeaseFor)
	if err != nil {
		if ctx.Err() == nil {
			w.log.ErrorContext(ctx, "express claim failed", "err", err)
		}
		return
	}
	w.startAll(jobsCtx, jobs, claimed, w.express)
}

// startAll starts claimed jobs in slots: each in its own, or as one batch.
func (w *Worker[T]) startAll(jobsCtx context.Context, jobs *sync.WaitGroup, claimed []Job[T], slots chan struct{}) {
	switch {
	case w.batches == nil:
		for _, j := range claimed {
			w.startBatch(jobsCtx, jobs, []Job[T]{j}, slots)
		}
	case len(claimed) > 0:
		w.startBatch(jobsCtx, jobs, claimed, slots)
	}
}

// startBatch runs a batch of jobs in one slot: in one HandleBatch call per
// priority, or, without a BatchHandler, its one job by Handle.
func (w *Worker[T]) startBatch(jobsCtx context.Context, jobs *sync.WaitGroup, batch []Job[T], slots chan struct{}) {
	slots <- struct{}{}
	bctx, cancel := context.WithCancelCause(jobsCtx)
	w.mu.Lock()
	for _, j := range batch {
		w.running[j.ID] = cancel // preempting one job cancels its batch
	}
	w.mu.Unlock()
	jobs.Add(1)
	go func() {
		defer jobs.Done()
		// One HandleBatch per priority, the highest first: a live job
		// claimed with bulk ones waits for none of them.
		slices.SortStableFunc(batch, func(a, b Job[T]) int { return cmp.Compare(b.Priority, a.Priority) })
		for lo := 0; lo < len(batch); {
			hi := lo + 1
			for hi < len(batch) && batch[hi].Priority == batch[lo].Priority {
				hi++
			}
			part := batch[lo:hi]
			pctx := bctx
			if part[0].Priority > 0 {
				pctx = urgency.With(bctx) // its writes go before bulk ones
			}
			start := time.Now()
			var acks []Ack
			if w.batches == nil {
				acks = []Ack{w.run(pctx, part[0])} // a batch of one
			} else {
				acks = w.runBatch(pctx, part)
			}
			took := time.Since(start)
			w.mu.Lock()
			for _, j := range part {
				delete(w.running, j.ID)
			}
			w.mu.Unlock()
			for _, ack := range acks {
				if w.cfg.Observe != nil {
					w.cfg.Observe(w.cfg.Name, ack.Outcome, took)
				}
				w.acks <- ack
			}
			lo = hi
		}
		cancel(nil)
		<-slots
		signal(w.freed)
	}()
}

// runBatch handles jobs in one HandleBatch call and turns what happened
// to each into its Ack.
func (w *Worker[T]) runBatch(ctx context.Context, batch []Job[T]) []Ack {
	ctx, cancel := w.withTimeout(ctx)
	defer cancel()
	results := w.handleBatch(ctx, batch)
	acks := make([]Ack, len(batch))
	for i, j := range batch {
		acks[i] = w.ack(ctx, j, results[i].Result, results[i].Err)
	}
	return acks
}

// handleBatch calls HandleBatch, turning a panic (or a short answer) into
// a transient error of every job.
func (w *Worker[T]) handleBatch(ctx context.Context, batch []Job[T]) (results []BatchResult) {
	all := func(err error) []BatchResult {
		out := make([]BatchResult, len(batch))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	defer func() {
		if v := recover(); v != nil {
			w.log.ErrorContext(ctx, "batch handler panicked", "jobs", len(batch), "panic", v, "stack", string(debug.Stack()))
			results = all(Classify(ClassPanic, false, true, panicError{v}))
		}
	}()
	results = w.batches.HandleBatch(ctx, batch)
	if len(results) != len(batch) {
		return all(fmt.Errorf("batch handler answered %d results for %d jobs", len(results), len(batch)))
	}
	return results
}

// withTimeout bounds ctx by JobTimeout, when there is one.
func (w *Worker[T]) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.cfg.JobTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, w.cfg.JobTimeout, Classify(ClassTimeout, false, true, fmt.Errorf("job ran past %s", w.cfg.JobTimeout)))
}

// run handles one job and turns what happened into an Ack.
func (w *Worker[T]) run(ctx context.Context, j Job[T]) Ack {
	ctx, cancel := w.withTimeout(ctx)
	defer cancel()
	res, err := w.handle(ctx, j)
	return w.ack(ctx, j, res, err)
}

// ack turns what handling j returned into its Ack.
func (w *Worker[T]) ack(ctx context.Context, j Job[T], res Result, err error) Ack {
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return Ack{ID: j.ID, Outcome: Succeeded, Next: res.Next, Output: res.Output, Usage: res.Usage}
	case errors.Is(cause, ErrPreempted), errors.Is(err, ErrPreempted):
		return Ack{ID: j.ID, Outcome: Released, Reason: "preempted"}
	case errors.Is(cause, ErrShutdown):
		return Ack{ID: j.ID, Outcome: Released, Reason: "shutdown"}
	}
	if cause != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		err = fmt.Errorf("%w: %w", cause, err) // a JobTimeout's cause carries its class
	}
	f, permanent := describe(err)
	switch {
	case permanent:
		w.log.WarnContext(ctx, "job failed permanently", "job", j.ID, "attempt", j.Attempt, "class", f.Class, "err", err)
		return Ack{ID: j.ID, Outcome: Failed, Failure: &f}
	case j.Attempt >= j.MaxAttempts:
		f.Message = fmt.Sprintf("attempts exhausted (%d/%d): %s", j.Attempt, j.MaxAttempts, f.Message)
		f.Recoverable = true
		w.log.WarnContext(ctx, "job failed, attempts exhausted", "job", j.ID, "attempt", j.Attempt, "class", f.Class, "err", err)
		return Ack{ID: j.ID, Outcome: Failed, Failure: &f}
	}
	delay := w.cfg.Backoff(j.Attempt)
	w.log.DebugContext(ctx, "job will retry", "job", j.ID, "attempt", j.Attempt, "retry_in", delay, "err", err)
	return Ack{ID: j.ID, Outcome: Retry, Failure: &f, RunAfter: time.Now().Add(delay)}
}

// handle calls the handler, turning a panic into a transient error.
func (w *Worker[T]) handle(ctx context.Context, j Job[T]) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			w.log.ErrorContext(ctx, "handler panicked", "job", j.ID, "panic", v, "stack", string(debug.Stack()))
			err = Classify(ClassPanic, false, true, panicError{v})
		}
	}()
	return w.handler.Handle(ctx, j)
}

// complete acks outcomes in batches: it takes what is waiting, up to 256,
// and writes it in one call.
func (w *Worker[T]) complete(ctx context.Context) {
	batch := make([]Ack, 0, 256)
	for a := range w.acks {
		batch = append(batch[:0], a)
	drain:
		for len(batch) < cap(batch) {
			select {
			case a, ok := <-w.acks:
				if !ok {
					break drain
				}
				batch = append(batch, a)
			default:
				break drain
			}
		}
		if err := w.queue.Ack(ctx, w.cfg.Owner, batch); err != nil {
			// The leases will expire and Rescue brings the jobs back.
			w.log.ErrorContext(ctx, "ack failed", "jobs", len(batch), "err", err)
		}
	}
}

// heartbeat extends the leases of running jobs until stop closes.
func (w *Worker[T]) heartbeat(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(w.cfg.HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		ids := make([]string, 0, len(w.running))
		for id := range w.running {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		if err := w.queue.Extend(ctx, w.cfg.Owner, ids, w.cfg.LeaseFor); err != nil {
			w.log.ErrorContext(ctx, "lease extension failed", "jobs", len(ids), "err", err)
		}
	}
}

// jitter spreads d by ±10% so that many workers do not poll in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
