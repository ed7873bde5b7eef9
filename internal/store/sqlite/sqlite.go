// Package sqlite is the embedded store backend: one SQLite database file in
// WAL mode (modernc.org/sqlite, pure Go), schema migrations versioned in code.
//
// Writes go through a single connection with BEGIN IMMEDIATE transactions, so
// every call that changes state (with its events) is one atomic transaction;
// reads use a small pool of their own. Several processes may share the file
// on one machine: SQLite's locking serialises their writes.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jervis-dev/jervis/internal/store"
)

// FileName is the database file Open creates in a data directory.
const FileName = "jervis.db"

// Options configures Open.
type Options struct {
	// Path is the database file.
	Path string
	// BusyTimeout is how long a write waits for another process's lock
	// before failing (default 5s).
	BusyTimeout time.Duration
	// Readers is the size of the read pool (default GOMAXPROCS, at least 2).
	Readers int
}

// Store is the SQLite backend of store.Store.
type Store struct {
	path  string
	w     *sql.DB // one connection: all writes
	r     *sql.DB // read pool
	stmts map[string]*sql.Stmt
}

var _ store.Store = (*Store)(nil)

// Open opens (creating when missing) the database at opts.Path and brings its
// schema up to date. Errors name the file and say what to do.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("sqlite: no database path")
	}
	opts.BusyTimeout = cmp.Or(opts.BusyTimeout, 5*time.Second)
	opts.Readers = cmp.Or(opts.Readers, max(2, runtime.GOMAXPROCS(0)))
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: database path %q: %w", opts.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory for %s: %w", path, err)
	}
	s := &Store{path: path}
	s.w, err = sql.Open("sqlite", dsn(path, opts.BusyTimeout, false))
	if err != nil {
		return nil, s.explain("open", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetConnMaxIdleTime(0)
	if err := s.migrate(ctx); err != nil {
		s.w.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		s.w.Close()
		return nil, err
	}
	s.r, err = sql.Open("sqlite", dsn(path, opts.BusyTimeout, true))
	if err != nil {
		s.w.Close()
		return nil, s.explain("open", err)
	}
	s.r.SetMaxOpenConns(opts.Readers)
	s.r.SetMaxIdleConns(opts.Readers)
	return s, nil
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
	}
	return "file:" + path + "?" + q.Encode()
}

// Path returns the database file.
func (s *Store) Path() string { return s.path }

// Close closes both pools.
func (s *Store) Close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping checks that the database answers and is writable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return s.explain("ping", err)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM schema_info").Scan(&n); err != nil {
		return s.explain("ping", err)
	}
	return nil
}

// explain wraps err with the file and, for the conditions an operator can fix,
// what to do.
func (s *Store) explain(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("sqlite: %s %s: the database is locked by another process (another jervis using the same --data directory, or a tool holding a write transaction); stop it or point --data elsewhere: %w", op, s.path, err)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("sqlite: %s %s: the file is corrupted or not a Jervis database; restore it from a backup, or move it (and its -wal and -shm files) aside to start with an empty store: %w", op, s.path, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY:
			return fmt.Errorf("sqlite: %s %s: cannot open the file for writing; check the directory exists and is writable by this user: %w", op, s.path, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("sqlite: %s %s: the disk is full; free space and restart: %w", op, s.path, err)
		}
	}
	return fmt.Errorf("sqlite: %s %s: %w", op, s.path, err)
}

// isConstraint reports a UNIQUE or PRIMARY KEY violation.
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// hot lists the statements of the claim → ack path, prepared once at Open
// on the writer connection; re-preparing them per call cost a fifth of the
// pipeline's CPU.
var hot = []string{
	sqlInsertEvent, sqlClaimTasks, sqlClaimTaskUpdate, sqlTaskByID, sqlTransitionTask,
	sqlClaimDocuments, sqlClaimDocumentUpdate, sqlDocumentByID, sqlTransitionDocument,
}

func (s *Store) prepare(ctx context.Context) error {
	s.stmts = make(map[string]*sql.Stmt, len(hot))
	for _, q := range hot {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return s.explain("prepare", err)
		}
		s.stmts[q] = st
	}
	return nil
}

// txn is a write transaction that runs the hot statements prepared.
type txn struct {
	*sql.Tx
	stmts map[string]*sql.Stmt
}

// ExecContext runs q, prepared when it is hot.
func (t txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st, ok := t.stmts[q]; ok {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q, prepared when it is hot.
func (t txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st, ok := t.stmts[q]; ok {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// write runs fn in one IMMEDIATE transaction on the writer connection.
func (s *Store) write(ctx context.Context, op string, fn func(tx txn) error) error {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.explain(op, err)
	}
	tx := txn{Tx: sqlTx, stmts: s.stmts}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) ||
			errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrIllegalTransition) {
			return err
		}
		return s.explain(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.explain(op, err)
	}
	return nil
}

// appendEvent inserts e in tx and returns its seq.
func appendEvent(ctx context.Context, tx txn, e store.Event) (int64, error) {
	var data any
	if len(e.Data) > 0 {
		data = string(e.Data)
	}
	res, err := tx.ExecContext(ctx, sqlInsertEvent, micros(e.At), e.Client, e.Aggregate, e.AggregateID, e.Type, data)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

const sqlInsertEvent = `INSERT INTO events (at, client, aggregate, aggregate_id, type, data) VALUES (?, ?, ?, ?, ?, ?)`

// micros stores times as Unix microseconds; the zero time is 0.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// jsonCol encodes v for a nullable JSON column.
func jsonCol(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	return string(b), nil
}

// errorCol encodes an ErrorInfo column.
func errorCol(e *store.ErrorInfo) any {
	if e == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// scanError decodes an ErrorInfo column.
func scanError(v sql.NullString) (*store.ErrorInfo, error) {
	if !v.Valid || v.String == "" {
		return nil, nil
	}
	var e store.ErrorInfo
	if err := json.Unmarshal([]byte(v.String), &e); err != nil {
		return nil, fmt.Errorf("decode error column: %w", err)
	}
	return &e, nil
}

// placeholders returns "?, ?, ..." for n arguments.
func placeholders(n int) string {
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, 3*n)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(b)
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
