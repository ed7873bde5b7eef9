package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/urgency"
)

// openKV opens a database of one table, kv (k TEXT, v INTEGER), closed
// when the test ends; upsert adds to a key's v.
func openKV(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

const upsert = `INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = kv.v + excluded.v`

// A write transaction's data statements are prepared after it commits and
// run prepared from then on, with the same results; a multi-statement
// script and schema changes are never prepared (a prepared statement would
// run only the first of several, every time).
func TestWriteStatementsPreparedOnceKnown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openKV(t)
	const (
		read   = `SELECT v FROM kv WHERE k = ?`
		script = `INSERT INTO kv (k, v) VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1; INSERT INTO kv (k, v) VALUES ('b', 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1`
	)
	for i := range 3 {
		var got int
		err := db.Write(ctx, "test", func(tx Tx) error {
			if _, err := tx.ExecContext(ctx, upsert, "x", 2); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, script); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS other (x INTEGER)`); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, read, "x").Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != 2*(i+1) {
			t.Fatalf("round %d: x = %d, want %d", i, got, 2*(i+1))
		}
		db.writeMu.Lock()
		_, up := db.stmts[upsert]
		_, rd := db.stmts[read]
		_, sc := db.stmts[script]
		n := len(db.stmts)
		db.writeMu.Unlock()
		if !up || !rd || sc || n != 2 {
			t.Fatalf("round %d: prepared upsert %v, read %v, script %v, %d in all", i, up, rd, sc, n)
		}
	}
	var a, b int
	if err := db.R.QueryRowContext(ctx, `SELECT (SELECT v FROM kv WHERE k = 'a'), (SELECT v FROM kv WHERE k = 'b')`).Scan(&a, &b); err != nil || a != 3 || b != 3 {
		t.Fatalf("the script ran a=%d b=%d times (%v), want 3 each", a, b, err)
	}
}

// A prepared statement a transaction runs many times is bound to it once
// (database/sql's Tx.StmtContext makes a new bound statement at each call),
// and each run still sees the rows the ones before it wrote.
func TestPreparedStatementsBoundOnceATransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openKV(t)
	for round := range 2 { // the first prepares it, the second runs it prepared
		err := db.Write(ctx, "test", func(tx Tx) error {
			var first *sql.Stmt
			for i := range 50 {
				if _, err := tx.ExecContext(ctx, upsert, "x", 1); err != nil {
					return err
				}
				st := tx.stmt(ctx, upsert)
				if round == 1 && (st == nil || first != nil && st != first) {
					t.Errorf("run %d: bound statement %p, the first run's %p", i, st, first)
				}
				first = st
			}
			if n := len(tx.bound); round == 1 && n != 1 {
				t.Errorf("%d statements bound, want 1", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := db.R.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'x'`).Scan(&v); err != nil || v != 100 {
		t.Fatalf("x = %d (%v), want 100", v, err)
	}
}

func TestPreparable(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"SELECT 1":                             true,
		"\n\tinsert into t values (1);":        true,
		"WITH x AS (SELECT 1) SELECT * FROM x": true,
		"DELETE FROM t; DELETE FROM u":         false,
		"CREATE TABLE t (x)":                   false,
		"PRAGMA user_version = 3":              false,
		"":                                     false,
	} {
		if got := preparable(q); got != want {
			t.Errorf("preparable(%q) = %v", q, got)
		}
	}
}

// While a write runs, an urgent writer that comes later goes before the
// bulk writers already waiting; a waiter whose context ends leaves the
// queue without writing, and the writers after it still write.
func TestUrgentWritersGoFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE log (seq INTEGER PRIMARY KEY, who TEXT NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	write := func(ctx context.Context, who string) error {
		return db.Write(ctx, who, func(tx Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO log (who) VALUES (?)`, who)
			return err
		})
	}
	waiting := func(n int) { untilWaiting(t, db, n) }
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := db.Write(ctx, "first", func(tx Tx) error { <-release; return nil }); err != nil {
			t.Error(err)
		}
	})
	waiting(0)
	untilHeld(t, db) // the first holds it
	errs := make(chan error, 4)
	wg.Go(func() { errs <- write(ctx, "bulk-1") })
	waiting(1)
	gone, give := context.WithCancel(ctx)
	wg.Go(func() { errs <- write(gone, "gives up") })
	waiting(2)
	wg.Go(func() { errs <- write(ctx, "bulk-2") })
	waiting(3)
	wg.Go(func() { errs <- write(urgency.With(ctx), "urgent") })
	waiting(4)
	give()
	waiting(3)
	close(release)
	wg.Wait()
	close(errs)
	var failed int
	for err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d writes failed, want the one that gave up", failed)
	}
	rows, err := db.Query(ctx, `SELECT who FROM log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var order []string
	for rows.Next() {
		var who string
		rows.Scan(&who)
		order = append(order, who)
	}
	if want := []string{"urgent", "bulk-1", "bulk-2"}; !slices.Equal(order, want) {
		t.Fatalf("wrote in order %v, want %v", order, want)
	}
}

// The WAL is copied into the database by the checkpointer, on its own
// connection, once checkpointPages pages wait; the writer copies only the
// tail committed meanwhile, and checkpoints itself only far behind
// (walSafetyPages). The WAL starts again from its beginning after each
// copy, so its file stays near checkpointPages pages.
func TestWALCheckpointedOffTheWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, Options{Path: path, Migrations: []string{`CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL) STRICT;`}, checkpointPages: 200})
	if err != nil {
		t.Fatal(err)
	}
	var pages, limit int64
	if err := db.Write(ctx, "test", func(tx Tx) error {
		if err := tx.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `PRAGMA journal_size_limit`).Scan(&limit)
	}); err != nil {
		t.Fatal(err)
	}
	if pages != walSafetyPages || limit != walSizeLimit {
		t.Fatalf("writer: wal_autocheckpoint %d, journal_size_limit %d; want %d, %d", pages, limit, walSafetyPages, walSizeLimit)
	}
	blob := make([]byte, 3000) // a page a commit at least
	const commits = 3000
	for i := range commits {
		if err := db.Write(ctx, "test", func(tx Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO blobs (id, b) VALUES (?, ?)`, i, blob)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	copies, tails := db.ck.copies.Load(), db.ck.tails.Load()
	if copies == 0 || tails == 0 {
		t.Fatalf("after %d commits the checkpointer copied %d times, the writer the tail %d times", commits, copies, tails)
	}
	// Writers reports them (bench's writer figures).
	ws := Writers()
	i := slices.IndexFunc(ws, func(u WriterUse) bool { return u.Path == db.Path })
	if i < 0 {
		t.Fatal("Writers does not list the database")
	}
	if u := ws[i]; u.Copies < copies || u.Tails < tails {
		t.Errorf("Writers: %d copies, %d tails; the checkpointer counted %d, %d", u.Copies, u.Tails, copies, tails)
	}
	// Each commit wrote a frame at least: fewer in the WAL now, it started
	// again from its beginning.
	frames, _, ok := db.ck.walIndex()
	t.Logf("%d commits: %d copies, %d tails, %d frames in the WAL", commits, copies, tails, frames)
	if !ok || frames >= commits {
		t.Fatalf("%d frames in the WAL (%v) after %d commits: it never started again", frames, ok, commits)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, Options{Path: path, Migrations: []string{`CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM blobs`).Scan(&n); err != nil || n != commits {
		t.Fatalf("reopened: %d rows (%v), want %d", n, err, commits)
	}
}

// walIndex reads the WAL index SQLite shares between connections: the
// pages committed, and how many of them a checkpoint copied.
func TestWALIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, Options{Path: path, Migrations: []string{`CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL) STRICT;`}, checkpointPages: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before, _, ok := db.ck.walIndex()
	if !ok {
		t.Fatal("the WAL index did not read")
	}
	if err := db.Write(ctx, "test", func(tx Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs (id, b) VALUES (1, ?)`, make([]byte, 20000))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	frames, copied, ok := db.ck.walIndex()
	if !ok || frames < before+5 || copied > before {
		t.Fatalf("after 20,000 bytes committed: %d frames, %d copied (%v); %d frames before", frames, copied, ok, before)
	}
	if _, err := db.W.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		t.Fatal(err)
	}
	if f, c, ok := db.ck.walIndex(); !ok || f != frames || c != frames {
		t.Fatalf("after a checkpoint: %d frames, %d copied (%v), want %d and %d", f, c, ok, frames, frames)
	}
	if _, _, ok := (&checkpointer{shm: filepath.Join(t.TempDir(), "none-shm")}).walIndex(); ok {
		t.Fatal("a missing WAL index read")
	}
}

// A write's statements run to their end once started, but a context that
// has ended refuses the next one, and the transaction with it: nothing it
// wrote commits.
func TestEndedContextFailsTheWrite(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE log (seq INTEGER PRIMARY KEY, who TEXT NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	err = db.Write(ctx, "two inserts", func(tx Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO log (who) VALUES ('first')`); err != nil {
			return err
		}
		cancel()
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM log`).Scan(&n); !errors.Is(err, context.Canceled) {
			t.Errorf("a query after the context ended: %v, want context.Canceled", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO log (who) VALUES ('second')`)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %v, want context.Canceled", err)
	}
	var n int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM log`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows committed (%v), want none", n, err)
	}
	if err := db.Write(t.Context(), "after", func(tx Tx) error {
		_, err := tx.ExecContext(t.Context(), `INSERT INTO log (who) VALUES ('after')`)
		return err
	}); err != nil {
		t.Fatalf("the writer after a failed write: %v", err)
	}
}

// Writers counts each database's write transactions, how long they held
// the writer and how long others waited for it, from Open until Close.
func TestWritersUseIsCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, Options{Path: path, Migrations: []string{`CREATE TABLE kv (k TEXT PRIMARY KEY) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	use := func() (WriterUse, bool) {
		for _, u := range Writers() {
			if u.Path == db.Path {
				return u, true
			}
		}
		return WriterUse{}, false
	}
	before, ok := use()
	if !ok || before.Transactions != 1 { // the migration
		t.Fatalf("after Open: %+v (listed %v), want the migration's one transaction", before, ok)
	}
	const hold = 60 * time.Millisecond
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := db.Write(ctx, "first", func(tx Tx) error { <-release; _, err := tx.ExecContext(ctx, `INSERT INTO kv VALUES ('a')`); return err }); err != nil {
			t.Error(err)
		}
	})
	untilHeld(t, db) // the first holds it
	wg.Go(func() {
		if err := db.Write(ctx, "second", func(tx Tx) error { _, err := tx.ExecContext(ctx, `INSERT INTO kv VALUES ('b')`); return err }); err != nil {
			t.Error(err)
		}
	})
	untilWaiting(t, db, 1) // the second waits
	time.Sleep(hold)
	close(release)
	wg.Wait()
	after, _ := use()
	if got := after.Transactions - before.Transactions; got != 2 {
		t.Errorf("%d transactions counted, want 2", got)
	}
	if held := after.Held - before.Held; held < hold {
		t.Errorf("held %v, want at least the first's %v", held, hold)
	}
	if waited := after.Waited - before.Waited; waited < hold {
		t.Errorf("waited %v, want at least the second's %v", waited, hold)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if u, ok := use(); ok {
		t.Errorf("closed, still listed: %+v", u)
	}
}

// untilHeld waits until a write holds db's writer.
func untilHeld(t *testing.T, db *DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		db.writer.mu.Lock()
		held := db.writer.held
		db.writer.mu.Unlock()
		if held {
			return
		}
	}
	t.Fatal("no write ever held the writer")
}

// untilWaiting waits until n writes wait for db's writer.
func untilWaiting(t *testing.T, db *DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		db.writer.mu.Lock()
		w := len(db.writer.urgent) + len(db.writer.normal)
		db.writer.mu.Unlock()
		if w == n {
			return
		}
	}
	t.Fatalf("%d writers never waited", n)
}

// Closing twice (a store and its owner both close it) stops the
// checkpointer once; a write after Close fails, it does not panic.
func TestCloseTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE log (seq INTEGER PRIMARY KEY) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, "after close", func(tx Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO log DEFAULT VALUES`)
		return err
	}); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}

// The checkpointer copies at its live size while urgent work (a live
// document) was seen within its window, and at its bulk size otherwise.
// Not parallel: another test's urgent write would make it live.
func TestCheckpointSizeFollowsLiveDocuments(t *testing.T) {
	c := &checkpointer{pages: 10, bulk: 40, live: 20 * time.Millisecond}
	urgency.With(context.Background())
	if got := c.threshold(); got != 10 {
		t.Fatalf("with a live document just seen: %d pages, want 10", got)
	}
	time.Sleep(60 * time.Millisecond)
	if got := c.threshold(); got != 40 {
		t.Fatalf("none seen for 60 ms: %d pages, want 40", got)
	}
	if walSafetyPages <= walBulkPages || walBulkPages <= walCheckpointPages {
		t.Fatalf("safety net %d, bulk %d, live %d: the writer's own checkpoint must come after the checkpointer's", walSafetyPages, walBulkPages, walCheckpointPages)
	}
}

// The writer keeps a page cache of writerCacheKiB across its transactions;
// the read connections keep SQLite's default.
func TestWriterHasTheLargerPageCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openKV(t)
	var w, r int
	if err := db.Write(ctx, "test", func(tx Tx) error {
		return tx.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&w)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.R.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&r); err != nil {
		t.Fatal(err)
	}
	if w != -writerCacheKiB || r != -2000 {
		t.Fatalf("cache_size: writer %d, reader %d; want %d and SQLite's -2000", w, r, -writerCacheKiB)
	}
}
