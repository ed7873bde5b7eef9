package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

// A store written before migration 10 keeps every document's content when
// the content moves out of the documents' rows, and its documents are
// claimed and read as before.
func TestContentMovesOutOfTheStateRows(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), FileName)
	old, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: migrations[:9]})
	if err != nil {
		t.Fatal(err)
	}
	now := sqlitedb.Micros(time.Now())
	err = old.Write(ctx, "old rows", func(tx sqlitedb.Tx) error {
		for i, id := range []string{"d1", "d2"} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO documents (id, client, source_type, external_id, version, content_hash, raw, normalized,
				observed_at, state, max_attempts, updated_at, priority) VALUES (?, 'acme', 'EMAIL', ?, 1, 'h', ?, ?, ?, 'NEW', 5, ?, 0)`,
				id, "m"+id, []byte("raw "+id), `{"title":"t`+id+`","body":"b`+id+`"}`, now+int64(i), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.GetDocument(ctx, "acme", "d2")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Raw) != "raw d2" || d.Normalized.Title != "td2" || d.Normalized.Body != "bd2" || d.State != store.DocNew {
		t.Fatalf("after the migration: %+v", d)
	}
	claimed, err := s.ClaimDocuments(ctx, store.Claim{Owner: "ix", Limit: 10, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].ID != "d1" || string(claimed[0].Raw) != "raw d1" || claimed[1].Normalized.Body != "bd2" {
		t.Fatalf("claimed %+v", claimed)
	}
	if _, err := s.db.Query(ctx, `SELECT raw FROM documents`); err == nil || !strings.Contains(err.Error(), "no such column") {
		t.Fatalf("the documents' rows still hold their content: %v", err)
	}
}
