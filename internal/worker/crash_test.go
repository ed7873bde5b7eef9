package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/internal/worker"
)

const crashEnv = "JERVIS_WORKER_CRASH_CHILD"

// runCrashChild runs the child side of TestCrashSafety when the test binary
// is started with crashEnv set; it reports whether it did.
func runCrashChild() bool {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return false
	}
	if err := crashChild(dir); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// crashChild runs a qualify worker whose handler records its effect,
// idempotently by task ID, in a second database; it also logs every call.
func crashChild(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := openShared(ctx, dir)
	if err != nil {
		return err
	}
	defer s.Close()
	fx, err := openEffects(dir)
	if err != nil {
		return err
	}
	defer fx.Close()
	h := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		if _, err := fx.ExecContext(ctx, `INSERT INTO calls (task_id, pid) VALUES (?, ?)`, j.ID, os.Getpid()); err != nil {
			return worker.Result{}, err
		}
		time.Sleep(2 * time.Millisecond) // work worth interrupting
		_, err := fx.ExecContext(ctx, `INSERT INTO effects (task_id) VALUES (?) ON CONFLICT DO NOTHING`, j.ID)
		return worker.Result{}, err
	})
	w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, worker.Config{
		Name: "crash", Concurrency: 8, BatchSize: 32, LeaseFor: time.Second, PollInterval: 20 * time.Millisecond,
		RescueEvery: 100 * time.Millisecond, BackoffBase: 10 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// sharedMongoEnv, when set, names the MongoDB database (URI|database)
// the crash children share instead of the SQLite file in their directory.
const sharedMongoEnv = "JERVIS_WORKER_SHARED_MONGO"

func openShared(ctx context.Context, dir string) (store.Store, error) {
	if v := os.Getenv(sharedMongoEnv); v != "" {
		uri, db, _ := strings.Cut(v, "|")
		return mongo.Open(ctx, mongo.Options{URI: uri, Database: db})
	}
	return sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
}

func openEffects(dir string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "effects.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS effects (task_id TEXT PRIMARY KEY);
		CREATE TABLE IF NOT EXISTS calls (n INTEGER PRIMARY KEY, task_id TEXT NOT NULL, pid INTEGER NOT NULL)`)
	return db, err
}

func startChild(t *testing.T, dir string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), crashEnv+"="+dir), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func count(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCrashSafetySIGKILLMidBatch(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, sqlite.FileName))
	const n = 2000
	enqueue(t, s, n, "crash")
	fx, err := openEffects(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()

	child := startChild(t, dir)
	waitFor(t, func() bool { return count(t, fx, `SELECT count(*) FROM effects`) >= n/5 })
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	st := stats(t, s)
	orphans := st.Tasks["QUALIFICATION_IN_PROGRESS"]
	t.Logf("killed after %d effects; %d tasks leased by the dead process, %d DONE", count(t, fx, `SELECT count(*) FROM effects`), orphans, st.Tasks["DONE"])
	if orphans == 0 {
		t.Fatal("the kill did not land mid-batch: no task was left leased")
	}

	child = startChild(t, dir)
	deadline := time.Now().Add(60 * time.Second)
	for stats(t, s).Tasks["DONE"] != n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = child.Process.Signal(syscall.SIGTERM)
	if err := child.Wait(); err != nil {
		t.Fatalf("restarted child did not exit cleanly on SIGTERM: %v", err)
	}

	st = stats(t, s)
	if st.Tasks["DONE"] != n {
		t.Fatalf("after restart: %+v", st.Tasks)
	}
	if effects := count(t, fx, `SELECT count(*) FROM effects`); effects != n {
		t.Fatalf("%d effects for %d tasks", effects, n)
	}
	if missing := count(t, fx, `SELECT count(*) FROM (SELECT DISTINCT task_id FROM calls)`); missing != n {
		t.Fatalf("%d distinct tasks called, want %d", missing, n)
	}
	// Every orphan came back through its expired lease, recorded in the log.
	evs, err := s.ListEvents(t.Context(), store.EventQuery{Aggregate: store.AggregateTask, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	rescued := 0
	for _, e := range evs {
		var c store.StateChange
		if e.Type == store.EventTaskState && json.Unmarshal(e.Data, &c) == nil && c.Reason == "lease_expired" {
			rescued++
		}
	}
	if int64(rescued) != orphans {
		t.Fatalf("%d lease_expired rescues, want the %d orphans", rescued, orphans)
	}
	t.Logf("calls=%d (re-run after the crash: %d) effects=%d rescued=%d", count(t, fx, `SELECT count(*) FROM calls`),
		count(t, fx, `SELECT count(*) FROM calls`)-n, n, rescued)
}

// Two worker processes share one store; one is killed with SIGKILL in the
// middle of its batches. The other goes on, takes over the dead one's
// tasks when their leases run out, and every task ends DONE exactly once:
// one effect, one DONE transition, re-runs only for the orphans.
func TestTwoProcessesOneKilled(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		twoProcessesOneKilled(t, dir, openStore(t, filepath.Join(dir, sqlite.FileName)))
	})
	t.Run("mongo", func(t *testing.T) {
		uri := integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=mongodb://... (a MongoDB server)")
		ctx := t.Context()
		db := fmt.Sprintf("jervis_worker_%d", time.Now().UnixNano()%1e9)
		s, err := mongo.Open(ctx, mongo.Options{URI: uri, Database: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Drop(context.Background()); _ = s.Close() })
		server, err := s.ServerVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(server, "FerretDB") {
			// Two racing workers may both win a claim there (storetest.Caps).
			integration.Lacks(t, server, "atomic conditional updates")
		}
		twoProcessesOneKilled(t, t.TempDir(), s, sharedMongoEnv+"="+uri+"|"+db)
	})
}

func twoProcessesOneKilled(t *testing.T, dir string, s store.Store, env ...string) {
	const n = 2000
	enqueue(t, s, n, "two")
	fx, err := openEffects(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	a, b := startChild(t, dir, env...), startChild(t, dir, env...)
	waitFor(t, func() bool {
		return count(t, fx, `SELECT count(DISTINCT pid) FROM calls`) == 2 && count(t, fx, `SELECT count(*) FROM effects`) >= n/4
	})
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	orphans := stats(t, s).Tasks["QUALIFICATION_IN_PROGRESS"]
	if orphans == 0 {
		t.Fatal("the kill did not land mid-batch: no task was leased")
	}
	deadline := time.Now().Add(90 * time.Second)
	for stats(t, s).Tasks["DONE"] != n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = b.Process.Signal(syscall.SIGTERM)
	if err := b.Wait(); err != nil {
		t.Fatalf("the surviving worker did not exit cleanly: %v", err)
	}
	if st := stats(t, s); st.Tasks["DONE"] != n {
		t.Fatalf("after the survivor: %+v", st.Tasks)
	}
	if effects := count(t, fx, `SELECT count(*) FROM effects`); effects != n {
		t.Fatalf("%d effects for %d tasks", effects, n)
	}
	evs, err := s.ListEvents(t.Context(), store.EventQuery{Aggregate: store.AggregateTask, Limit: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]int{}
	for _, e := range evs {
		var c store.StateChange
		if e.Type == store.EventTaskState && json.Unmarshal(e.Data, &c) == nil && c.To == string(store.TaskDone) {
			done[e.AggregateID]++
		}
	}
	for id, k := range done {
		if k != 1 {
			t.Fatalf("task %s reached DONE %d times", id, k)
		}
	}
	if len(done) != n {
		t.Fatalf("%d tasks recorded DONE, want %d", len(done), n)
	}
	calls := count(t, fx, `SELECT count(*) FROM calls`)
	if reruns := calls - n; reruns > int(orphans) {
		t.Fatalf("%d handler re-runs for %d orphaned tasks", reruns, orphans)
	}
	t.Logf("killed one of two workers with %d tasks leased; %d calls for %d tasks; the survivor (pid %d) finished",
		orphans, calls, n, b.Process.Pid)
}
