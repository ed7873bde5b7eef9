package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jervis-dev/jervis/internal/worker"
)

// ErrBusy is why Begin refuses: a user request is in flight, or the last one
// ended less than the idle threshold ago. It wraps worker.ErrPreempted, so a
// task refused this way goes back to READY_FOR_GPU without spending an
// attempt.
var ErrBusy = fmt.Errorf("%w: users are active", worker.ErrPreempted)

// DefaultIdleAfter is how long no user request must have been active before
// background work runs.
const DefaultIdleAfter = 30 * time.Second

// Monitor tracks user requests and the background work that must yield to
// them. The API calls RegisterRequestStart for every user request (after
// authentication: an anonymous flood cannot starve the executor); the
// executor asks Begin before it runs anything and End when it stops.
//
// Begin and RegisterRequestStart take one lock, so the two never interleave:
// work begins only while no request is in flight and the idle threshold has
// passed, and a request that arrives cancels all running work, with
// worker.ErrPreempted as the cause, before it returns. Running work
// therefore never overlaps a user request: it stops at the instant the
// request starts (Work.Stopped).
type Monitor struct {
	idleAfter time.Duration

	mu       sync.Mutex
	inFlight int
	lastEnd  time.Time
	works    map[*Work]struct{}
	timer    *time.Timer
	idle     chan struct{} // coalesced: idleness may have begun

	requests, preemptions atomic.Int64
}

// NewMonitor returns a monitor; 0 takes DefaultIdleAfter. The idle threshold
// counts from now: a process just started does not assume its users away.
func NewMonitor(idleAfter time.Duration) *Monitor {
	if idleAfter <= 0 {
		idleAfter = DefaultIdleAfter
	}
	m := &Monitor{idleAfter: idleAfter, lastEnd: time.Now(), works: map[*Work]struct{}{}, idle: make(chan struct{}, 1)}
	m.timer = time.AfterFunc(idleAfter, m.signalIdle)
	return m
}

func (m *Monitor) signalIdle() {
	select {
	case m.idle <- struct{}{}:
	default:
	}
}

// IdleSignal receives when the idle threshold may just have passed.
func (m *Monitor) IdleSignal() <-chan struct{} { return m.idle }

// IdleAfter returns the idle threshold.
func (m *Monitor) IdleAfter() time.Duration { return m.idleAfter }

// RegisterRequestStart records a user request and cancels all running
// background work at once. Call the returned function when the request has
// been answered (more calls do nothing).
func (m *Monitor) RegisterRequestStart() (end func()) {
	m.requests.Add(1)
	m.mu.Lock()
	m.inFlight++
	if len(m.works) > 0 {
		now := time.Now()
		for w := range m.works {
			w.preempted, w.stopped = true, now
			w.cancel(worker.ErrPreempted)
			delete(m.works, w)
			m.preemptions.Add(1)
		}
	}
	m.mu.Unlock()
	var once sync.Once
	return func() { once.Do(m.requestEnd) }
}

func (m *Monitor) requestEnd() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
	m.lastEnd = time.Now()
	if m.inFlight == 0 {
		m.timer.Reset(m.idleAfter)
	}
}

// Idle reports whether background work may begin now.
func (m *Monitor) Idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idleLocked(time.Now())
}

func (m *Monitor) idleLocked(now time.Time) bool {
	return m.inFlight == 0 && now.Sub(m.lastEnd) >= m.idleAfter
}

// InFlight returns how many user requests are being answered.
func (m *Monitor) InFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inFlight
}

// Requests returns how many user requests were registered; Preemptions how
// many running works they cancelled.
func (m *Monitor) Requests() int64    { return m.requests.Load() }
func (m *Monitor) Preemptions() int64 { return m.preemptions.Load() }

// Work is one piece of background work that began while users were idle.
type Work struct {
	m         *Monitor
	cancel    context.CancelCauseFunc
	started   time.Time
	stopped   time.Time
	preempted bool
}

// Begin starts background work if users are idle, returning a context a
// user request cancels (cause worker.ErrPreempted); otherwise ErrBusy.
func (m *Monitor) Begin(ctx context.Context) (context.Context, *Work, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if !m.idleLocked(now) {
		return ctx, nil, ErrBusy
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &Work{m: m, cancel: cancel, started: now}
	m.works[w] = struct{}{}
	return wctx, w, nil
}

// End stops the work and reports whether it ran to its end; false means a
// user request preempted it, and whatever it produced must be discarded.
func (w *Work) End() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if !w.preempted {
		w.stopped = time.Now()
		delete(w.m.works, w)
		w.cancel(context.Canceled)
	}
	return !w.preempted
}

// Span returns when the work began and stopped (after End).
func (w *Work) Span() (started, stopped time.Time) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.started, w.stopped
}
