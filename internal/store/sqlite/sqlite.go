// Package sqlite is the embedded store backend: one SQLite database file in
// WAL mode (modernc.org/sqlite, pure Go), schema migrations versioned in code.
//
// Writes go through a single connection with BEGIN IMMEDIATE transactions, so
// every call that changes state (with its events) is one atomic transaction;
// reads use a small pool of their own. Several processes may share the file
// on one machine: SQLite's locking serialises their writes.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
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
}

// Store is the SQLite backend of store.Store.
type Store struct {
	db *sqlitedb.DB
}

var _ store.Store = (*Store)(nil)

// hot lists the statements of the store → index → claim → ack path,
// prepared once at Open;
// re-preparing them per call cost a fifth of the pipeline's CPU.
var hot = []string{
	sqlInsertEvent, sqlClaimTasks, sqlClaimTaskUpdate, sqlTaskByID, sqlTransitionTask,
	sqlClaimDocuments, sqlClaimDocumentUpdate, sqlDocumentByID, sqlDocumentStateByID, sqlTransitionDocument,
	sqlEnqueueTask, sqlNextVersion, sqlInsertDocument, sqlInsertBody,
}

// Open opens (creating when missing) the database at opts.Path and brings its
// schema up to date. Errors name the file and say what to do.
func Open(ctx context.Context, opts Options) (*Store, error) {
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: opts.Path, BusyTimeout: opts.BusyTimeout, Migrations: migrations, Hot: hot})
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// Path returns the database file.
func (s *Store) Path() string { return s.db.Path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// appendEvent inserts e in tx and returns its seq.
func appendEvent(ctx context.Context, tx sqlitedb.Tx, e store.Event) (int64, error) {
	var data any
	if len(e.Data) > 0 {
		data = string(e.Data)
	}
	res, err := tx.ExecContext(ctx, sqlInsertEvent, sqlitedb.Micros(e.At), e.Client, e.Aggregate, e.AggregateID, e.Type, data)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// sqlInsertEvent inserts an event with its origin: the row number of the
// task or document it is about (NULL for other aggregates, or one whose row
// is not there). The events are indexed by it (migration 13), so that a new
// aggregate's events go to the end of that index, where an index by the
// aggregate's random ID put each at a random page: 12 events a document
// made 12 pages dirty in each batch's commit (BENCHMARKS.md, thirty-third
// round). A row's number is stable: tasks and documents are never deleted,
// and jervis.db is never vacuumed (VACUUM may renumber rows).
const sqlInsertEvent = `INSERT INTO events (at, client, aggregate, aggregate_id, type, data, origin) VALUES (?1, ?2, ?3, ?4, ?5, ?6,
	CASE ?3 WHEN 'task' THEN (SELECT rowid FROM tasks WHERE id = ?4) WHEN 'document' THEN (SELECT rowid FROM documents WHERE id = ?4) END)`

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
