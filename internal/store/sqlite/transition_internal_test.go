package sqlite

import (
	"testing"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

// A transition reads a document's state, not its content: a document whose
// stored content no longer decodes is still quarantined by the indexer
// holding it, and its content is left as it was.
func TestTransitionReadsNoContent(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	d, _, err := s.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "m1", Raw: []byte("raw"),
		Normalized: store.Normalized{Title: "t", Body: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Write(ctx, "break it", func(tx sqlitedb.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE documents SET state = ?, lease_owner = 'ix' WHERE id = ?`, store.DocIndexing, d.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE document_bodies SET normalized = '{not json' WHERE id = ?`, d.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bad := &store.ErrorInfo{Class: "unreadable", Message: "its stored content does not decode"}
	if err := s.TransitionDocuments(ctx, []store.DocumentTransition{{ID: d.ID, From: store.DocIndexing, To: store.DocQuarantined, Owner: "ix", Error: bad}}); err != nil {
		t.Fatalf("quarantine: %v", err)
	}
	var state, normalized string
	if err := s.db.QueryRow(ctx, `SELECT state, normalized FROM documents JOIN document_bodies USING (id) WHERE id = ?`, d.ID).Scan(&state, &normalized); err != nil {
		t.Fatal(err)
	}
	if state != string(store.DocQuarantined) || normalized != "{not json" {
		t.Fatalf("state %s, content %q after the transition", state, normalized)
	}
}
