// Package sqlitedb is the SQLite plumbing the embedded backends share
// (pipeline store, graph, chunks): one database file in WAL mode with a
// single writer connection running BEGIN IMMEDIATE transactions and a small
// read pool, schema migrations versioned in code (PRAGMA user_version), hot
// statements prepared once, and errors that name the file and say what to do.
package sqlitedb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jervis-dev/jervis/internal/urgency"
)

// Options configures Open.
type Options struct {
	// Path is the database file; its directory is created when missing.
	Path string
	// BusyTimeout is how long a write waits for another process's lock
	// (default 5s).
	BusyTimeout time.Duration
	// Readers is the size of the read pool (default GOMAXPROCS, at least 2).
	Readers int
	// Migrations bring the schema to version i+1; never edit a shipped one.
	Migrations []string
	// Hot statements are prepared once on the writer connection at Open.
	// Any other statement a write transaction runs is prepared after that
	// transaction commits, and kept (up to maxWriteStmts).
	Hot []string

	// checkpointPages is when the checkpointer copies the WAL, live or bulk
	// (default walCheckpointPages and walBulkPages; tests make it small).
	checkpointPages int64
}

// DB is an open database.
type DB struct {
	Path string
	W    *sql.DB // the one writer connection
	R    *sql.DB // read pool

	writer  writerLock // who writes next: urgent writers first
	writeMu sync.Mutex
	stmts   map[string]*sql.Stmt // prepared on the writer
	wanted  map[string]bool      // run unprepared in a transaction: prepare next

	readMu    sync.Mutex
	readStmts map[string]*sql.Stmt // prepared on the read pool (Query)

	// The writer's use since Open (Writers).
	transactions, held, waited atomic.Int64

	ck *checkpointer // copies the WAL into the file off the writer's turn
}

// maxReadStmts and maxWriteStmts bound the statements kept prepared:
// queries are a fixed set of strings (per client table), so this is never
// reached unless one is built from data (a list of placeholders), and then
// the rest run unprepared.
const (
	maxReadStmts  = 256
	maxWriteStmts = 256
)

// Query runs a read query on the read pool, prepared once and kept: parsing
// and planning were a large part of the small queries a search makes.
func (db *DB) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := db.readStmt(ctx, q)
	if err != nil || st == nil {
		return db.R.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

// QueryRow is Query for one row.
func (db *DB) QueryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := db.readStmt(ctx, q)
	if err != nil || st == nil {
		return db.R.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (db *DB) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	db.readMu.Lock()
	defer db.readMu.Unlock()
	if st, ok := db.readStmts[q]; ok {
		return st, nil
	}
	if len(db.readStmts) >= maxReadStmts {
		return nil, nil
	}
	st, err := db.R.PrepareContext(ctx, q)
	if err != nil {
		return nil, err // the unprepared run reports it
	}
	if db.readStmts == nil {
		db.readStmts = map[string]*sql.Stmt{}
	}
	db.readStmts[q] = st
	return st, nil
}

// Open opens (creating when missing) the database and migrates it. The
// migration runs in a write transaction, which also proves at start-up that
// the file is a database and that no other process holds it locked.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if opts.Path == "" {
		return nil, errors.New("sqlite: no database path")
	}
	busy := cmp.Or(opts.BusyTimeout, 5*time.Second)
	readers := cmp.Or(opts.Readers, max(2, runtime.GOMAXPROCS(0)))
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: database path %q: %w", opts.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory for %s: %w", path, err)
	}
	db := &DB{Path: path, stmts: map[string]*sql.Stmt{}}
	if db.W, err = sql.Open("sqlite", dsn(path, busy, false)); err != nil {
		return nil, db.Explain("open", err)
	}
	db.W.SetMaxOpenConns(1)
	db.W.SetConnMaxIdleTime(0)
	if err := db.migrate(ctx, opts.Migrations); err != nil {
		db.W.Close()
		return nil, err
	}
	for _, q := range opts.Hot {
		st, err := db.W.PrepareContext(ctx, q)
		if err != nil {
			db.Close()
			return nil, db.Explain("prepare", err)
		}
		db.stmts[q] = st
	}
	if db.R, err = sql.Open("sqlite", dsn(path, busy, true)); err != nil {
		db.Close()
		return nil, db.Explain("open", err)
	}
	db.R.SetMaxOpenConns(readers)
	db.R.SetMaxIdleConns(readers)
	if db.ck, err = startCheckpointer(path, busy, cmp.Or(opts.checkpointPages, walCheckpointPages), cmp.Or(opts.checkpointPages, walBulkPages)); err != nil {
		db.Close()
		return nil, db.Explain("open", err)
	}
	opened.Store(db, struct{}{})
	return db, nil
}

func dsn(path string, busy time.Duration, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	if readOnly {
		q.Add("_pragma", "query_only(ON)")
	} else {
		q.Set("_txlock", "immediate")
		q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writerCacheKiB))
		// The checkpointer copies the WAL into the database (checkpoint.go);
		// the writer itself only when that fell far behind. The WAL file is
		// cut back to walSizeLimit when it starts again.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walSafetyPages))
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	}
	return "file:" + path + "?" + q.Encode()
}

// walCheckpointPages is how many WAL pages wait before the checkpointer
// copies them (about 40 MiB of 4 KiB pages) while live documents come,
// instead of SQLite's 1,000: a page written again and again between
// checkpoints (an index's, a B-tree's inner pages) is copied into the
// database once. Until the forty-fourth round the writer ran these
// checkpoints itself. In a profile of `jervis bench` on the dev Jira corpus,
// commits were 30 % of the pipeline's CPU, the automatic checkpoint (every
// 1,000 pages) 3.7 of its 8.1 s; with 10,000, the same bench (three runs
// each, alternating) went 240, 244, 275 → 280, 307, 311 documents/s and the
// mailing list 268, 282 → 330, 316, peak RSS and search times the same
// (BENCHMARKS.md). A larger copy leaves a larger tail for the writer to
// copy in its turn, which a live document's writes then wait behind: with
// 40,000 throughout, a live note's p99 freshness went 113–158 → 190–243 ms
// (forty-fifth round), so that size is kept for bulk work (walBulkPages).
// A kill -9 loses nothing either way: a committed page is in the WAL, which
// the next open replays.
//
// walBulkPages is the checkpointer's size while no live document came
// within urgency.Window: a bulk import or reprocess.
// Copying every 10,000 of its pages copied the same inner and tail pages
// over and over (the checkpointers: 4 % of the Jira drain's CPU, 12 % at
// 100,000 synthetic documents). With 40,000 (forty-fifth round,
// alternating): Jira 930–957 → 973–1,004 documents/s, the list 786–830 →
// 809–838, 100,000 synthetic documents 768–779 → 809; the WAL file grows to
// about 160 MiB before it starts again.
const (
	walCheckpointPages = 10000
	walBulkPages       = 40000
	walSizeLimit       = 64 << 20
)

// writerCacheKiB is the writer's page cache, instead of SQLite's 2 MiB
// (the read connections keep that). The writer is the one connection that
// changes the file, so what it caches stays valid from one transaction to
// the next; with 2 MiB, at 100,000 synthetic documents (a few GiB of
// B-trees) it read the inner pages of every index it inserted into again
// and again, and spilled a large transaction's pages into the WAL before
// its commit wrote them once more. With 16 MiB (forty-eighth round, two
// runs each, alternating): 100,000 synthetic documents 702, 739 → 749, 764
// documents/s (pipeline CPU-s per 1,000 2.20, 2.16 → 2.09, 2.04; read
// calls a document 130 → 73, bytes written 427 → 368 KB); 10,000 synthetic
// documents and the dev mailing list within the noise. 32 MiB did no
// better at 100,000, 64 MiB nothing on the list, and each costs its size
// in RSS once the files outgrow it.
const writerCacheKiB = 16 << 10

// Close closes the statements and both pools.
func (db *DB) Close() error {
	opened.Delete(db)
	var errs []error
	if db.ck != nil {
		errs = append(errs, db.ck.stop())
	}
	db.writeMu.Lock()
	for _, st := range db.stmts {
		st.Close()
	}
	db.stmts = nil
	db.writeMu.Unlock()
	db.readMu.Lock()
	for _, st := range db.readStmts {
		st.Close()
	}
	db.readStmts = nil
	db.readMu.Unlock()
	if db.R != nil {
		errs = append(errs, db.R.Close())
	}
	errs = append(errs, db.W.Close())
	if db.ck != nil { // after every SQLite connection (checkpointer.shmFile)
		errs = append(errs, db.ck.closeIndex())
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	var v int
	if err := db.R.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return db.Explain("ping", err)
	}
	return nil
}

// Explain wraps a driver error with the file and, for conditions an operator
// can fix, what to do. Errors that are not from SQLite pass through.
func (db *DB) Explain(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("sqlite: %s %s: the database is locked by another process (another jervis using the same --data directory, or a tool holding a write transaction); stop it or point --data elsewhere: %w", op, db.Path, err)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("sqlite: %s %s: the file is corrupted or not a Jervis database; restore it from a backup, or move it (and its -wal and -shm files) aside to start with an empty store: %w", op, db.Path, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY:
			return fmt.Errorf("sqlite: %s %s: cannot open the file for writing; check the directory exists and is writable by this user: %w", op, db.Path, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("sqlite: %s %s: the disk is full; free space and restart: %w", op, db.Path, err)
		}
		return fmt.Errorf("sqlite: %s %s: %w", op, db.Path, err)
	}
	return err
}

// IsConstraint reports a UNIQUE or PRIMARY KEY violation.
func IsConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// Tx is a write transaction that runs its statements prepared once they
// are known (parsing and planning were 7 % of the qualifier's CPU).
type Tx struct {
	*sql.Tx
	db *DB
	// bound are the writer's prepared statements this transaction has
	// used, bound to it once: database/sql's Tx.StmtContext makes a new
	// transaction-bound statement at each call (a graph write runs the same
	// few statements hundreds of times).
	bound map[string]*sql.Stmt
}

// stmt returns q prepared on the writer, or nil the first time (q is then
// prepared after the transaction).
func (t Tx) stmt(ctx context.Context, q string) *sql.Stmt {
	t.db.writeMu.Lock()
	defer t.db.writeMu.Unlock()
	if st, ok := t.bound[q]; ok {
		return st
	}
	if st, ok := t.db.stmts[q]; ok {
		st = t.Tx.StmtContext(ctx, st)
		t.bound[q] = st
		return st
	}
	if len(t.db.stmts)+len(t.db.wanted) < maxWriteStmts && preparable(q) {
		if t.db.wanted == nil {
			t.db.wanted = map[string]bool{}
		}
		t.db.wanted[q] = true
	}
	return nil
}

// ExecContext runs q.
func (t Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, err := running(ctx)
	if err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q.
func (t Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, err := running(ctx)
	if err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q for one row.
func (t Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if c, err := running(ctx); err == nil {
		ctx = c // else the row reports ctx's error
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// running returns ctx without its cancellation, or ctx's error when it has
// ended: a write transaction's statement, once started, runs to its end
// (they are short), and one not started yet is refused, so an ended
// context still fails the transaction, between its statements. A
// cancellable context cost the driver a goroutine and a progress handler
// for each statement, and database/sql a goroutine for each transaction.
func running(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return ctx, err
	}
	return context.WithoutCancel(ctx), nil
}

// preparable: one data statement. (A prepared statement runs only the
// first of several; schema changes run once.)
func preparable(q string) bool {
	q = strings.TrimSpace(q)
	if strings.Contains(strings.TrimSuffix(q, ";"), ";") {
		return false
	}
	words := strings.Fields(q)
	if len(words) == 0 {
		return false
	}
	switch strings.ToUpper(words[0]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE":
		return true
	}
	return false
}

// prepareWanted prepares, on the writer (free again), the statements the
// last transactions ran unprepared. One that does not prepare (a DDL
// statement, a table a migration dropped) is left to run unprepared.
func (db *DB) prepareWanted(ctx context.Context) {
	db.writeMu.Lock()
	wanted := db.wanted
	db.wanted = nil
	db.writeMu.Unlock()
	for q := range wanted {
		st, err := db.W.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		db.writeMu.Lock()
		if _, ok := db.stmts[q]; ok {
			st.Close()
		} else {
			db.stmts[q] = st
		}
		db.writeMu.Unlock()
	}
}

// Write runs fn in one IMMEDIATE transaction on the writer connection and
// commits when it returns nil. SQLite errors are explained; fn's own errors
// come back unchanged.
func (db *DB) Write(ctx context.Context, op string, fn func(tx Tx) error) error {
	asked := time.Now()
	if err := db.writer.lock(ctx); err != nil {
		return db.Explain(op, err)
	}
	got := time.Now()
	db.waited.Add(int64(got.Sub(asked)))
	if trace.IsEnabled() { // jervis --trace: what the writer does while it holds the file
		defer trace.StartRegion(ctx, filepath.Base(db.Path)+": "+op).End()
	}
	defer func() {
		db.transactions.Add(1)
		db.held.Add(int64(time.Since(got)))
		db.writer.unlock()
	}()
	sqlTx, err := db.W.BeginTx(context.WithoutCancel(ctx), nil) // see running
	if err != nil {
		return db.Explain(op, err)
	}
	if err := fn(Tx{Tx: sqlTx, db: db, bound: map[string]*sql.Stmt{}}); err != nil {
		_ = sqlTx.Rollback()
		return db.Explain(op, err)
	}
	if err := sqlTx.Commit(); err != nil {
		return db.Explain(op, err)
	}
	db.prepareWanted(context.WithoutCancel(ctx))
	if db.ck != nil {
		db.ck.committed(db.W)
	}
	return nil
}

func (db *DB) migrate(ctx context.Context, migrations []string) error {
	return db.Write(ctx, "migrate", func(tx Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("sqlite: migrate %s: schema version %d is newer than this binary supports (%d); run a newer jervis", db.Path, v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Micros stores a time as Unix microseconds; the zero time is 0.
func Micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// Time reverses Micros.
func Time(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// Placeholders returns "?, ?, ..." for n arguments.
func Placeholders(n int) string {
	b := make([]byte, 0, 3*n)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(b)
}

// Args converts a slice to query arguments.
func Args[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// Reads is the read pool as a QueryContext/QueryRowContext pair that runs
// prepared statements (Query).
type Reads struct{ db *DB }

// Reads returns the prepared read path.
func (db *DB) Reads() Reads { return Reads{db} }

// QueryContext runs Query.
func (r Reads) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.db.Query(ctx, q, args...)
}

// QueryRowContext runs QueryRow.
func (r Reads) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return r.db.QueryRow(ctx, q, args...)
}

// Strings runs a read query of one text column and returns its values.
func (db *DB) Strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// WriterUse is how a database's writer was used since it was opened: its
// write transactions, how long they held the writer, and how long writers
// waited for it (summed over the writers: several wait at once). A writer
// held nearly all the time is what bounds the writes to its file: one
// transaction at a time is all SQLite allows. Copies are the checkpoints
// the checkpointer ran (each a PASSIVE copy of the WAL into the file, off
// the writer's turn), Tails those the writer ran in its turn after them.
type WriterUse struct {
	Path          string
	Transactions  int64
	Held, Waited  time.Duration
	Copies, Tails int64
}

// opened holds the databases open in this process (Writers).
var opened sync.Map // *DB → struct{}

// Writers returns the writer use of every database open in this process,
// by path.
func Writers() []WriterUse {
	var out []WriterUse
	opened.Range(func(k, _ any) bool {
		db := k.(*DB)
		u := WriterUse{Path: db.Path, Transactions: db.transactions.Load(),
			Held: time.Duration(db.held.Load()), Waited: time.Duration(db.waited.Load())}
		if db.ck != nil {
			u.Copies, u.Tails = db.ck.copies.Load(), db.ck.tails.Load()
		}
		out = append(out, u)
		return true
	})
	slices.SortFunc(out, func(a, b WriterUse) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// writerLock orders the writers of a database: one at a time, those whose
// context is urgent (internal/urgency: a live document's work) before any
// other waiting, each kind first come first served. Bulk work queued
// earlier would otherwise hold a live document behind many transactions.
type writerLock struct {
	mu             sync.Mutex
	held           bool
	urgent, normal []chan struct{}
}

// lock waits for the writer, or for ctx to end.
func (l *writerLock) lock(ctx context.Context) error {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	urgent := urgency.Of(ctx)
	if urgent {
		l.urgent = append(l.urgent, turn)
	} else {
		l.normal = append(l.normal, turn)
	}
	l.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	q := &l.normal
	if urgent {
		q = &l.urgent
	}
	if i := slices.Index(*q, turn); i >= 0 { // still waiting: leave the queue
		*q = slices.Delete(*q, i, i+1)
		l.mu.Unlock()
		return ctx.Err()
	}
	l.mu.Unlock()
	l.unlock() // the turn came as ctx ended: pass it on
	return ctx.Err()
}

// unlock hands the writer to the next waiting, urgent ones first.
func (l *writerLock) unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range []*[]chan struct{}{&l.urgent, &l.normal} {
		if len(*q) > 0 {
			next := (*q)[0]
			*q = (*q)[1:]
			close(next)
			return
		}
	}
	l.held = false
}
