package pollers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

const crashEnv = "JERVISTEST_POLLER_CRASH"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

func openStore(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeFiles(t testing.TB, dir string, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("note-%03d.md", i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("# Note %d\n\nSee https://wiki.acme.test/n/%d", i, i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts the scheduler, calls fn, then stops it.
func run(t *testing.T, s *pollers.Scheduler, fn func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	fn()
	cancel()
	wg.Wait()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pollEvents(t *testing.T, st store.Store, conn string) map[string][]pollers.PollResult {
	t.Helper()
	evs, err := st.ListEvents(t.Context(), store.EventQuery{Aggregate: pollers.AggregatePoll, AggregateID: conn})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]pollers.PollResult{}
	for _, e := range evs {
		var r pollers.PollResult
		json.Unmarshal(e.Data, &r)
		out[e.Type] = append(out[e.Type], r)
	}
	return out
}

func TestPollStoresThenCommitsAndRecords(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "j.db"))
	dir := t.TempDir()
	writeFiles(t, dir, 5)
	src, _ := filedrop.New(dir, 2, kinds.Default())
	var woken atomic.Int32
	s, err := pollers.NewScheduler(pollers.Config{Store: st, Stored: func() { woken.Add(1) }},
		pollers.Connection{ID: "notes", Client: "acme", SourceType: store.SourceFile, Schedule: "@every 1h", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, func() {
		waitFor(t, "first poll", func() bool { return len(pollEvents(t, st, "notes")[pollers.EventPollFinished]) == 1 })
		writeFiles(t, dir, 7) // two new, five rewritten with the same content
		later := time.Now().Add(time.Second)
		for i := range 7 {
			p := filepath.Join(dir, fmt.Sprintf("note-%03d.md", i))
			os.Chtimes(p, later, later)
		}
		if err := s.PollNow("notes"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "second poll", func() bool { return len(pollEvents(t, st, "notes")[pollers.EventPollFinished]) == 2 })
	})
	ev := pollEvents(t, st, "notes")
	first, second := ev[pollers.EventPollFinished][0], ev[pollers.EventPollFinished][1]
	if first.Fetched != 5 || first.NewVersions != 5 || first.Pages != 3 || second.Fetched != 7 || second.NewVersions != 2 || len(ev[pollers.EventPollStarted]) != 2 {
		t.Fatalf("events: %+v", ev)
	}
	stats, _ := st.Stats(t.Context())
	// Woken after each page that stored something new: 3 pages in the
	// first poll, 2 of the 4 in the second.
	if stats.Documents["NEW"] != 7 || woken.Load() != 5 {
		t.Fatalf("documents %v, woken %d", stats.Documents, woken.Load())
	}
	// The first poll is a backfill, and so is a page with more behind it:
	// bulk. The last page of a later poll is what is new now: live.
	docs, err := st.ListDocuments(t.Context(), store.DocumentQuery{Client: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int{}
	for _, d := range docs {
		live[d.ExternalID] = d.Priority
	}
	if len(live) != 7 || live["note-006.md"] != store.PriorityLive || live["note-005.md"] != store.PriorityBulk || live["note-000.md"] != store.PriorityBulk {
		t.Fatalf("priorities %v", live)
	}
	cursor, err := st.GetCursor(t.Context(), "poll:notes")
	if err != nil || cursor != second.Cursor {
		t.Fatalf("cursor %q (%v), event says %q", cursor, err, second.Cursor)
	}
	if err := s.PollNow("nope"); !errors.Is(err, pollers.ErrUnknownConnection) {
		t.Fatalf("unknown connection: %v", err)
	}
}

// scripted fails its first calls with Retry-After, then succeeds.
type scripted struct {
	calls    atomic.Int32
	failures int32
	after    time.Duration
	at       []time.Time
	mu       sync.Mutex
}

func (s *scripted) Poll(ctx context.Context, cursor string) (pollers.Batch, error) {
	n := s.calls.Add(1)
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	if n <= s.failures {
		return pollers.Batch{}, &pollers.RetryAfterError{After: s.after, Err: errors.New("HTTP 429 Too Many Requests")}
	}
	return pollers.Batch{Cursor: fmt.Sprint(n)}, nil
}

func TestRetryAfterIsHonouredAndOthersKeepPolling(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "j.db"))
	slow := &scripted{failures: 2, after: 300 * time.Millisecond}
	healthy := &scripted{}
	s, err := pollers.NewScheduler(pollers.Config{Store: st, BackoffBase: 10 * time.Millisecond},
		pollers.Connection{ID: "jira", Client: "acme", Schedule: "@every 1h", Source: slow},
		pollers.Connection{ID: "notes", Client: "acme", Schedule: "@every 1h", Source: healthy})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, func() {
		waitFor(t, "recovery", func() bool { return slow.calls.Load() == 3 })
		// The healthy connection polls whenever asked while the other waits.
		for range 3 {
			s.PollNow("notes")
			time.Sleep(20 * time.Millisecond)
		}
		waitFor(t, "healthy polls", func() bool { return healthy.calls.Load() >= 3 })
	})
	slow.mu.Lock()
	defer slow.mu.Unlock()
	for i := 1; i < len(slow.at); i++ {
		if gap := slow.at[i].Sub(slow.at[i-1]); gap < 300*time.Millisecond {
			t.Fatalf("retry %d after %s, before Retry-After", i, gap)
		}
	}
	ev := pollEvents(t, st, "jira")
	if len(ev[pollers.EventPollFailed]) != 2 || ev[pollers.EventPollFailed][0].RetryIn != "300ms" || len(ev[pollers.EventPollFinished]) != 1 {
		t.Fatalf("events %+v", ev)
	}
}

func TestBadConnections(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "j.db"))
	src := &scripted{}
	for _, tc := range []struct {
		conns []pollers.Connection
		want  string
	}{
		{[]pollers.Connection{{ID: "x", Client: "acme", Schedule: "every now and then", Source: src}}, "schedule"},
		{[]pollers.Connection{{ID: "x", Client: "Bad Client", Schedule: "@every 1m", Source: src}}, "client"},
		{[]pollers.Connection{{ID: "x", Client: "acme", Schedule: "@every 1m"}}, "no source"},
		{[]pollers.Connection{{ID: "x", Client: "acme", Schedule: "@every 1m", Source: src}, {ID: "x", Client: "acme", Schedule: "@every 1m", Source: src}}, "twice"},
	} {
		if _, err := pollers.NewScheduler(pollers.Config{Store: st}, tc.conns...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// crashChild polls the drop directory once; with kill set it SIGKILLs
// itself right after the documents are stored, before the cursor is
// committed.
func crashChild(dir string) int {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, "j.db")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	src, _ := filedrop.New(filepath.Join(dir, "drop"), 100, kinds.Default())
	stored := func() {}
	if os.Getenv("JERVISTEST_KILL") != "" {
		stored = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	sched, err := pollers.NewScheduler(pollers.Config{Store: s, Stored: stored},
		pollers.Connection{ID: "drop", Client: "acme", Schedule: "@every 1h", Source: src})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			evs, _ := s.ListEvents(ctx, store.EventQuery{Aggregate: pollers.AggregatePoll})
			for _, e := range evs {
				if e.Type == pollers.EventPollFinished {
					cancel()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	sched.Run(ctx)
	return 0
}

func TestCrashBetweenStoreAndCursorCommitDuplicatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "drop"), 0o755)
	writeFiles(t, filepath.Join(dir, "drop"), 20)
	child := func(kill bool) error {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		if kill {
			cmd.Env = append(cmd.Env, "JERVISTEST_KILL=1")
		}
		cmd.Stderr = os.Stderr
		return cmd.Run()
	}
	err := child(true)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed: %v", err)
	}
	st := openStore(t, filepath.Join(dir, "j.db"))
	if _, err := st.GetCursor(t.Context(), "poll:drop"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cursor committed before the kill: %v", err)
	}
	before, _ := st.Stats(t.Context())
	if before.Documents["NEW"] != 20 {
		t.Fatalf("stored before the kill: %v", before.Documents)
	}
	if err := child(false); err != nil {
		t.Fatal(err)
	}
	after, _ := st.Stats(t.Context())
	if after.Documents["NEW"] != 20 {
		t.Fatalf("after restart %v, want the same 20 documents", after.Documents)
	}
	versions, _ := st.ListDocumentVersions(t.Context(), "acme", store.SourceFile, "note-007.md")
	if len(versions) != 1 {
		t.Fatalf("%d versions of one file", len(versions))
	}
	if _, err := st.GetCursor(t.Context(), "poll:drop"); err != nil {
		t.Fatalf("cursor after the clean run: %v", err)
	}
}
