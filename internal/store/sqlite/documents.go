package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

const docColumns = `id, client, source_type, connection, external_id, version, content_hash, raw, normalized,
	observed_at, state, lease_owner, lease_until, attempts, max_attempts, run_after, error, updated_at, priority`

// docsFrom joins a document's state row to its content (raw and
// normalized), which migration 10 keeps apart in document_bodies: a
// claim, a transition or a lease rewrites the whole row it changes, and
// with the content in it (16 KB a Jira issue, four overflow pages) that was
// most of the store's writes. CROSS JOIN keeps documents the outer loop, so
// a query reads documents' own index first.
const docsFrom = ` FROM documents CROSS JOIN document_bodies USING (id)`

var (
	sqlClaimDocuments      = `SELECT ` + docStateColumns + ` FROM documents WHERE state = ? AND run_after <= ? AND priority >= ? ORDER BY priority DESC, run_after, observed_at LIMIT ?`
	sqlClaimDocumentUpdate = `UPDATE documents SET state = ?, lease_owner = ?, lease_until = ?, attempts = ?, updated_at = ? WHERE id = ?`
	sqlDocumentByID        = `SELECT ` + docColumns + docsFrom + ` WHERE id = ?`
	sqlNextVersion         = `SELECT COALESCE(MAX(version), 0) + 1 FROM documents WHERE client = ? AND source_type = ? AND external_id = ?`
	sqlInsertDocument      = `INSERT INTO documents (` + strings.Replace(docColumns, "raw, normalized,", "", 1) + `, degraded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertBody          = `INSERT INTO document_bodies (id, raw, normalized) VALUES (?, ?, ?)`
	sqlTransitionDocument  = `UPDATE documents SET state = ?, lease_owner = '', lease_until = 0, run_after = ?, attempts = ?, error = ?, updated_at = ?, priority = ? WHERE id = ?`
)

// sqlDocumentStateByID reads a document without its content (raw and
// normalized, empty): what a transition checks and changes. Decoding the
// normalized JSON of every document an indexer acknowledged was most of a
// transition's time, in the store's one writer.
var sqlDocumentStateByID = `SELECT ` + docStateColumns + ` FROM documents WHERE id = ?`

// docStateColumns are docColumns without the content (raw NULL,
// normalized empty).
var docStateColumns = strings.Replace(docColumns, "raw, normalized", "NULL, '{}'", 1)

type scanner interface{ Scan(dest ...any) error }

func scanDocument(row scanner) (store.Document, error) {
	var (
		d                                       store.Document
		normalized                              string
		errCol                                  sql.NullString
		observed, leaseUntil, runAfter, updated int64
	)
	err := row.Scan(&d.ID, &d.Client, &d.SourceType, &d.Connection, &d.ExternalID, &d.Version, &d.ContentHash,
		&d.Raw, &normalized, &observed, &d.State, &d.LeaseOwner, &leaseUntil, &d.Attempts, &d.MaxAttempts,
		&runAfter, &errCol, &updated, &d.Priority)
	if err != nil {
		return d, err
	}
	if err := store.DecodeNormalized(normalized, &d.Normalized); err != nil {
		return d, fmt.Errorf("document %s: decode normalized: %w", d.ID, err)
	}
	d.ObservedAt, d.LeaseUntil, d.RunAfter, d.UpdatedAt = sqlitedb.Time(observed), sqlitedb.Time(leaseUntil), sqlitedb.Time(runAfter), sqlitedb.Time(updated)
	d.Error, err = scanError(errCol)
	return d, err
}

func queryDocuments(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]store.Document, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Document
	for rows.Next() {
		d, err := scanDocument(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// PutDocument implements store.Documents.
func (s *Store) PutDocument(ctx context.Context, doc store.Document) (store.Document, bool, error) {
	rs, err := s.PutDocuments(ctx, []store.Document{doc})
	if err != nil {
		return doc, false, err
	}
	return rs[0].Stored, rs[0].Created, rs[0].Err
}

// PutDocuments implements store.Documents: the documents the store takes
// are written in one transaction (a document a transaction was 5,128
// commits for the dev Jira corpus's import).
func (s *Store) PutDocuments(ctx context.Context, docs []store.Document) ([]store.PutResult, error) {
	now := time.Now()
	out, normalized := store.PrepareDocuments(docs, now)
	if !slices.ContainsFunc(out, func(r store.PutResult) bool { return r.Err == nil }) {
		return out, nil
	}
	err := s.db.Write(ctx, "put documents", func(tx sqlitedb.Tx) error {
		for i := range out {
			if out[i].Err != nil {
				continue
			}
			stored, created, err := putDocument(ctx, tx, out[i].Stored, normalized[i], now)
			if err != nil {
				return err
			}
			out[i].Stored, out[i].Created = stored, created
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putDocument stores doc (prepared) in tx unless its content is stored
// already, in which case it returns the stored version.
func putDocument(ctx context.Context, tx sqlitedb.Tx, doc store.Document, normalized []byte, now time.Time) (store.Document, bool, error) {
	existing, err := queryDocuments(ctx, tx, sqlDocumentByID, doc.ID)
	if err != nil {
		return doc, false, err
	}
	if len(existing) == 1 {
		return existing[0], false, nil
	}
	rows, err := tx.QueryContext(ctx, sqlNextVersion, doc.Client, doc.SourceType, doc.ExternalID)
	if err != nil {
		return doc, false, err
	}
	rows.Next()
	err = rows.Scan(&doc.Version)
	rows.Close()
	if err != nil {
		return doc, false, err
	}
	if _, err := tx.ExecContext(ctx, sqlInsertDocument,
		doc.ID, doc.Client, doc.SourceType, doc.Connection, doc.ExternalID, doc.Version, doc.ContentHash,
		sqlitedb.Micros(doc.ObservedAt), doc.State, "", 0, 0, doc.MaxAttempts, 0, nil, sqlitedb.Micros(now), doc.Priority,
		len(doc.Normalized.Warnings) > 0); err != nil {
		return doc, false, err
	}
	if _, err := tx.ExecContext(ctx, sqlInsertBody, doc.ID, doc.Raw, string(normalized)); err != nil {
		return doc, false, err
	}
	_, err = appendEvent(ctx, tx, store.DocumentStoredEvent(doc, now))
	return doc, err == nil, err
}

// GetDocument implements store.Documents.
func (s *Store) GetDocument(ctx context.Context, client, id string) (store.Document, error) {
	ds, err := queryDocuments(ctx, s.db.Reads(), `SELECT `+docColumns+docsFrom+` WHERE client = ? AND id = ?`, client, id)
	if err != nil {
		return store.Document{}, s.db.Explain("get document", err)
	}
	if len(ds) == 0 {
		return store.Document{}, fmt.Errorf("document %s: %w", id, store.ErrNotFound)
	}
	return ds[0], nil
}

// GetDocuments implements store.Documents: one query a few hundred IDs.
func (s *Store) GetDocuments(ctx context.Context, client string, ids []string) ([]store.Document, error) {
	var out []store.Document
	for part := range slices.Chunk(slices.Compact(slices.Sorted(slices.Values(ids))), 500) {
		ds, err := queryDocuments(ctx, s.db.Reads(), getDocumentsSQL(len(part)), append([]any{client}, sqlitedb.Args(part)...)...)
		if err != nil {
			return nil, s.db.Explain("get documents", err)
		}
		out = append(out, ds...)
	}
	return out, nil
}

// getDocumentsSQL reads n documents of a client by ID. The client is
// compared, not searched (+client): given both, SQLite walked the client's
// entries of documents_list for the IDs, every one of the client's
// documents at each call (at 100,000 documents, a quarter of the
// qualifier's CPU: BENCHMARKS.md, forty-first round).
func getDocumentsSQL(n int) string {
	return `SELECT ` + docColumns + docsFrom + ` WHERE +client = ? AND id IN (` + sqlitedb.Placeholders(n) + `)`
}

// ListDocuments implements store.Documents.
func (s *Store) ListDocuments(ctx context.Context, q store.DocumentQuery) ([]store.Document, error) {
	where, args := listFilter(map[string]string{"client": q.Client, "state": string(q.State), "source_type": string(q.SourceType)}, q.After)
	if q.Degraded {
		where += " AND degraded = 1"
	}
	cols := strings.Replace(docColumns, "raw,", "NULL,", 1)
	ds, err := queryDocuments(ctx, s.db.Reads(), `SELECT `+cols+listDocumentsFrom(q)+` WHERE `+where+` ORDER BY updated_at DESC, id LIMIT ?`, append(args, listLimit(q.Limit))...)
	if err != nil {
		return nil, s.db.Explain("list documents", err)
	}
	return ds, nil
}

// listDocumentsFrom is ListDocuments' FROM clause. Quarantined documents
// are found by the claim index, whose first column is the state: by the
// client's listing index, a page of them read every document of the client
// (as listTasksSQL says of failed tasks). They are few, so sorting them all
// costs less than that walk.
func listDocumentsFrom(q store.DocumentQuery) string {
	if q.State == store.DocQuarantined && !q.Degraded {
		return strings.Replace(docsFrom, " documents ", " documents INDEXED BY documents_claim ", 1)
	}
	return docsFrom
}

// listFilter is the WHERE clause of a listing: equal columns (empty values
// match all) and, with after, what comes after it in (updated_at DESC, id)
// order.
func listFilter(eq map[string]string, after *store.Position) (string, []any) {
	where, args := []string{"1 = 1"}, []any{}
	for _, col := range slices.Sorted(maps.Keys(eq)) {
		if v := eq[col]; v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	if after != nil {
		at := sqlitedb.Micros(after.UpdatedAt)
		where = append(where, "(updated_at < ? OR (updated_at = ? AND id > ?))")
		args = append(args, at, at, after.ID)
	}
	return strings.Join(where, " AND "), args
}

func listLimit(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

// ListDocumentVersions implements store.Documents.
func (s *Store) ListDocumentVersions(ctx context.Context, client string, source store.SourceType, externalID string) ([]store.Document, error) {
	ds, err := queryDocuments(ctx, s.db.Reads(), `SELECT `+docColumns+docsFrom+` WHERE client = ? AND source_type = ? AND external_id = ? ORDER BY version`,
		client, source, externalID)
	if err != nil {
		return nil, s.db.Explain("list document versions", err)
	}
	return ds, nil
}

// ClaimDocuments implements store.Documents. The writer's transaction
// takes the documents' state rows; their content is read after it, through
// the read pool (readContent). Reading and decoding 64 documents' content
// in the transaction held the store's one writer for it: on the dev Jira
// corpus the claims held it 1.7–2.0 s of 12.3, and 0.9–1.1 s without.
func (s *Store) ClaimDocuments(ctx context.Context, c store.Claim) ([]store.Document, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []store.Document
	err := s.db.Write(ctx, "claim documents", func(tx sqlitedb.Tx) error {
		var err error
		out, err = queryDocuments(ctx, tx, sqlClaimDocuments, store.DocNew, sqlitedb.Micros(c.Now), c.MinPriority(), c.Limit)
		if err != nil {
			return err
		}
		for i := range out {
			d := &out[i]
			d.State, d.LeaseOwner, d.LeaseUntil, d.UpdatedAt = store.DocIndexing, c.Owner, c.LeaseUntil, c.Now
			d.Attempts++
			if _, err := tx.ExecContext(ctx, sqlClaimDocumentUpdate, d.State, d.LeaseOwner, sqlitedb.Micros(d.LeaseUntil), d.Attempts, sqlitedb.Micros(c.Now), d.ID); err != nil {
				return err
			}
			if _, err := appendEvent(ctx, tx, store.DocumentStateEvent(*d, store.DocNew, c.Owner, "claim", c.Now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Claimed and not returned (the read failed), a document is rescued when
	// its lease ends, as after a crash.
	if err := s.readContent(ctx, out); err != nil {
		return nil, s.db.Explain("claim documents: read content", err)
	}
	return out, nil
}

// readContent fills in docs' content (raw and normalized) from
// document_bodies. A version's content never changes once stored.
func (s *Store) readContent(ctx context.Context, docs []store.Document) error {
	if len(docs) == 0 {
		return nil
	}
	at := make(map[string]int, len(docs))
	ids := make([]string, len(docs))
	for i, d := range docs {
		at[d.ID], ids[i] = i, d.ID
	}
	rows, err := s.db.Reads().QueryContext(ctx, `SELECT id, raw, normalized FROM document_bodies WHERE id IN (SELECT value FROM json_each(?))`, sqlitedb.JSONList(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var id, normalized string
		var raw []byte
		if err := rows.Scan(&id, &raw, &normalized); err != nil {
			return err
		}
		d := &docs[at[id]]
		d.Raw = raw
		if err := store.DecodeNormalized(normalized, &d.Normalized); err != nil {
			return fmt.Errorf("document %s: decode normalized: %w", id, err)
		}
		read++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if read != len(docs) {
		return fmt.Errorf("%d of %d documents have no content", len(docs)-read, len(docs))
	}
	return nil
}

// ExtendDocumentLeases implements store.Documents.
func (s *Store) ExtendDocumentLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error) {
	return s.extendLeases(ctx, "documents", []string{string(store.DocIndexing)}, owner, ids, until)
}

// TransitionDocuments implements store.Documents.
func (s *Store) TransitionDocuments(ctx context.Context, ts []store.DocumentTransition) error {
	var skipped []error
	err := s.db.Write(ctx, "transition documents", func(tx sqlitedb.Tx) error {
		skipped = skipped[:0]
		now := time.Now()
		for _, t := range ts {
			err := transitionDocument(ctx, tx, t, now)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrIllegalTransition) || errors.Is(err, store.ErrNotFound) {
				skipped = append(skipped, err)
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(skipped...)
}

func transitionDocument(ctx context.Context, tx sqlitedb.Tx, t store.DocumentTransition, now time.Time) error {
	ds, err := queryDocuments(ctx, tx, sqlDocumentStateByID, t.ID)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return fmt.Errorf("document %s: %w", t.ID, store.ErrNotFound)
	}
	if err := store.CheckDocumentTransition(ds[0], t); err != nil {
		return err
	}
	d := store.ApplyDocumentTransition(ds[0], t, now)
	if _, err := tx.ExecContext(ctx, sqlTransitionDocument, d.State, sqlitedb.Micros(d.RunAfter), d.Attempts, errorCol(d.Error), sqlitedb.Micros(now), d.Priority, d.ID); err != nil {
		return err
	}
	_, err = appendEvent(ctx, tx, store.DocumentStateEvent(d, t.From, t.Owner, t.Reason, now))
	return err
}

// RescueDocuments implements store.Documents.
func (s *Store) RescueDocuments(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.db.Write(ctx, "rescue documents", func(tx sqlitedb.Tx) error {
		ds, err := queryDocuments(ctx, tx, `SELECT `+docColumns+docsFrom+` WHERE lease_until > 0 AND lease_until < ? AND state = ?`,
			sqlitedb.Micros(now), store.DocIndexing)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := transitionDocument(ctx, tx, store.RescueDocument(d, now), now); err != nil {
				return err
			}
		}
		n = len(ds)
		return nil
	})
	return n, err
}

// extendLeases moves the owner's leases on ids (in a running state) to until.
func (s *Store) extendLeases(ctx context.Context, table string, running []string, owner string, ids []string, until time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := s.db.Write(ctx, "extend leases", func(tx sqlitedb.Tx) error {
		args := append([]any{sqlitedb.Micros(until), owner}, sqlitedb.Args(running)...)
		args = append(args, sqlitedb.Args(ids)...)
		res, err := tx.ExecContext(ctx, `UPDATE `+table+` SET lease_until = ? WHERE lease_owner = ? AND state IN (`+sqlitedb.Placeholders(len(running))+`) AND id IN (`+sqlitedb.Placeholders(len(ids))+`)`, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
