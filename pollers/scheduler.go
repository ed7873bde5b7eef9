package pollers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
)

// ErrUnknownConnection is returned by PollNow for an ID that is not
// scheduled.
var ErrUnknownConnection = errors.New("unknown connection")

// Connection is one configured source of one client.
type Connection struct {
	ID         string           // unique; names the cursor and the poll events
	Client     string           // the client its documents belong to
	SourceType store.SourceType // the type its documents get when the source leaves it empty
	Schedule   string           // robfig/cron spec: "@every 2m", "*/5 * * * *"
	Source     Source
}

// Store is what the scheduler needs from the pipeline state.
type Store interface {
	store.Documents
	store.Cursors
	store.Events
}

// Config tunes a Scheduler.
type Config struct {
	Store Store
	// Stored is called after a poll stored new documents (wake the indexers).
	Stored func()
	// BackoffBase and BackoffMax bound the delay after a failed poll
	// (defaults 5s and 10m); the delay doubles per consecutive failure, with
	// ±20% jitter, and is never shorter than a Retry-After.
	BackoffBase, BackoffMax time.Duration
	// MaxPages bounds the pages one poll fetches before yielding (default 100).
	MaxPages int
	Logger   *slog.Logger
	// Observe, when set, is told how each poll ended: EventPollFinished or
	// EventPollFailed, with its result (metrics).
	Observe func(connection, outcome string, r PollResult)
	// Redact removes secrets from a failed poll's error before it is
	// logged or recorded (default redact.Text: URL userinfo and secret
	// query values; give it a redact.Redactor's Text to remove the
	// connections' own tokens too, as a server may echo them back).
	Redact func(string) string
}

// Scheduler runs every connection's polls. Create it with NewScheduler, then
// call Run once.
type Scheduler struct {
	cfg   Config
	log   *slog.Logger
	conns map[string]*conn
}

type conn struct {
	Connection
	sched cron.Schedule
	now   chan struct{} // coalesced "poll now"
}

// PollResult is the data of a poll.finished event.
type PollResult struct {
	Fetched     int     `json:"fetched"`
	NewVersions int     `json:"newVersions"`
	Pages       int     `json:"pages"`
	Cursor      string  `json:"cursor,omitempty"`
	Seconds     float64 `json:"seconds"`
	Error       string  `json:"error,omitempty"`
	RetryIn     string  `json:"retryIn,omitempty"`
}

// Poll event types.
const (
	EventPollStarted  = "poll.started"
	EventPollFinished = "poll.finished"
	EventPollFailed   = "poll.failed"
	AggregatePoll     = "poll"
)

// NewScheduler checks the connections and returns a scheduler for them.
func NewScheduler(cfg Config, conns ...Connection) (*Scheduler, error) {
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, 5*time.Second)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, 10*time.Minute)
	cfg.MaxPages = cmp.Or(cfg.MaxPages, 100)
	if cfg.Redact == nil {
		cfg.Redact = redact.Text
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == nil {
		return nil, errors.New("pollers: no store")
	}
	s := &Scheduler{cfg: cfg, log: cfg.Logger, conns: map[string]*conn{}}
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	for _, c := range conns {
		switch {
		case c.ID == "":
			return nil, errors.New("pollers: a connection has no id")
		case s.conns[c.ID] != nil:
			return nil, fmt.Errorf("pollers: connection %s: id used twice", c.ID)
		case c.Source == nil:
			return nil, fmt.Errorf("pollers: connection %s: no source", c.ID)
		}
		if err := store.ValidateClientID(c.Client); err != nil {
			return nil, fmt.Errorf("pollers: connection %s: %w", c.ID, err)
		}
		sched, err := parser.Parse(c.Schedule)
		if err != nil {
			return nil, fmt.Errorf("pollers: connection %s: schedule %q: %w", c.ID, c.Schedule, err)
		}
		s.conns[c.ID] = &conn{Connection: c, sched: sched, now: make(chan struct{}, 1)}
	}
	return s, nil
}

// PollNow asks for a poll of connection id as soon as it is free. Requests
// coalesce.
func (s *Scheduler) PollNow(id string) error {
	c := s.conns[id]
	if c == nil {
		return fmt.Errorf("%w: %s", ErrUnknownConnection, id)
	}
	select {
	case c.now <- struct{}{}:
	default:
	}
	return nil
}

// Run polls every connection on its schedule until ctx ends. Each
// connection has its own goroutine, so a slow or failing one never holds
// the others up. A poll in progress when ctx ends is abandoned where it is:
// what it stored is kept and its cursor is not advanced past it.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		wg.Go(func() { s.loop(ctx, c) })
	}
	wg.Wait()
	return nil
}

func (s *Scheduler) loop(ctx context.Context, c *conn) {
	log := s.log.With("connection", c.ID, "client", c.Client)
	failures := 0
	next := time.Now() // first poll at start
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c.now:
			timer.Stop()
		case <-timer.C:
		}
		err := s.Poll(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			next = c.sched.Next(time.Now())
			continue
		}
		failures++
		delay := backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, failures)
		if ra := RetryAfter(err); ra > delay {
			delay = ra
		}
		next = time.Now().Add(delay)
		msg := s.cfg.Redact(err.Error())
		log.WarnContext(ctx, "poll failed", "err", msg, "retry_in", delay.Round(time.Millisecond), "failures", failures)
		s.record(ctx, c, EventPollFailed, PollResult{Error: msg, RetryIn: delay.Round(time.Millisecond).String()})
	}
}

func backoff(base, maxDelay time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return min(maxDelay, time.Duration(float64(d)*(0.8+0.4*rand.Float64())))
}

// Poll runs one poll of c now: pages until the source has no more (or
// MaxPages), storing each page's documents and then committing its cursor.
func (s *Scheduler) Poll(ctx context.Context, c *conn) error {
	start := time.Now()
	key := "poll:" + c.ID
	cursor, err := s.cfg.Store.GetCursor(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read cursor: %w", err)
	}
	s.record(ctx, c, EventPollStarted, PollResult{Cursor: cursor})
	backfill := cursor == "" // the connection's first poll
	var res PollResult
	for page := 0; page < s.cfg.MaxPages; page++ {
		batch, err := c.Source.Poll(ctx, cursor)
		if err != nil {
			return fmt.Errorf("poll page %d: %w", page+1, err)
		}
		res.Pages++
		// A poll that is caught up brings what is new now: it is indexed
		// before imports and backfills (pages with more behind them).
		priority := store.PriorityLive
		if backfill || batch.More {
			priority = store.PriorityBulk
		}
		created, err := s.storeAll(ctx, c, batch.Documents, priority)
		res.Fetched += len(batch.Documents)
		res.NewVersions += created
		if created > 0 && s.cfg.Stored != nil {
			s.cfg.Stored()
		}
		if err != nil {
			return err
		}
		if batch.Cursor != cursor {
			if err := s.cfg.Store.CommitCursor(ctx, key, batch.Cursor); err != nil {
				return fmt.Errorf("commit cursor: %w", err)
			}
			cursor = batch.Cursor
		}
		if !batch.More {
			break
		}
	}
	res.Cursor, res.Seconds = cursor, time.Since(start).Seconds()
	s.record(ctx, c, EventPollFinished, res)
	s.log.InfoContext(ctx, "poll finished", "connection", c.ID, "fetched", res.Fetched, "new_versions", res.NewVersions, "pages", res.Pages)
	return nil
}

// storeAll stores a page's documents through the one ingest path (a
// document the store refuses as invalid is stored as unparsable, with the
// reason); a failure of the store stops the page (its cursor is not
// committed, so it is fetched again).
func (s *Scheduler) storeAll(ctx context.Context, c *conn, docs []store.Document, priority int) (int, error) {
	for i := range docs {
		docs[i].SourceType = cmp.Or(docs[i].SourceType, c.SourceType)
	}
	receipts, err := Ingester{Store: s.cfg.Store, Priority: priority}.Documents(ctx, c.Client, c.ID, docs...)
	created := 0
	for _, r := range receipts {
		if r.Created {
			created++
		}
	}
	return created, err
}

func (s *Scheduler) record(ctx context.Context, c *conn, typ string, r PollResult) {
	if s.cfg.Observe != nil && typ != EventPollStarted {
		s.cfg.Observe(c.ID, typ, r)
	}
	data, _ := json.Marshal(r)
	if _, err := s.cfg.Store.AppendEvent(context.WithoutCancel(ctx), store.Event{Client: c.Client, Aggregate: AggregatePoll, AggregateID: c.ID, Type: typ, Data: data}); err != nil {
		s.log.ErrorContext(ctx, "record poll event", "connection", c.ID, "err", err)
	}
}
