package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/sqlitedb/sqlitedbtest"
	"github.com/jervis-dev/jervis/internal/store"
)

// A store written before migration 10 keeps every document's content when
// the content moves out of the documents' rows, and its documents are
// claimed and read as before.
func TestContentMovesOutOfTheStateRows(t *testing.T) {
	ctx := t.Context()
	now := sqlitedb.Micros(time.Now())
	path := sqlitedbtest.WrittenBefore(t, FileName, migrations[:9], func(ctx context.Context, tx sqlitedb.Tx) error {
		for i, id := range []string{"d1", "d2"} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO documents (id, client, source_type, external_id, version, content_hash, raw, normalized,
				observed_at, state, max_attempts, updated_at, priority) VALUES (?, 'acme', 'EMAIL', ?, 1, 'h', ?, ?, ?, 'NEW', 5, ?, 0)`,
				id, "m"+id, []byte("raw "+id), `{"title":"t`+id+`","body":"b`+id+`"}`, now+int64(i), now); err != nil {
				return err
			}
		}
		return nil
	})

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

// A store written before migration 13 gets its events' origins, and each
// aggregate's events — those stored before and after the migration, of
// tasks, documents and other aggregates — are listed as before, and only
// its own.
func TestEventsGetTheirOrigins(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var docs []store.Document
	for i := range 3 {
		docs = append(docs, store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: fmt.Sprintf("m%d", i),
			Raw: []byte(fmt.Sprint("raw ", i)), Normalized: store.Normalized{Title: "t", Body: "b"}})
	}
	put, err := s.PutDocuments(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []store.Task
	for _, p := range put {
		tasks = append(tasks, store.Task{ID: store.TaskID(p.Stored.ID, store.KindData, ""), Kind: store.KindData, Client: "acme",
			SourceDoc: p.Stored.ID, CorrelationID: p.Stored.ID, State: store.TaskNew, MaxAttempts: 3})
	}
	if _, err := s.EnqueueTasks(ctx, tasks...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, store.Event{Client: "acme", Aggregate: "poll", AggregateID: "mail", Type: "poll.finished"}); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of migration 12.
	err = s.db.Write(ctx, "schema 12", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, undo15+undo14+`DROP INDEX events_origin; DROP INDEX events_aggregate; ALTER TABLE events DROP COLUMN origin;
			CREATE INDEX events_aggregate ON events (aggregate_id, seq); PRAGMA user_version = 12;`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	if s, err = Open(ctx, Options{Path: path}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var unset int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM events WHERE origin IS NULL AND aggregate IN ('task', 'document')`).Scan(&unset); err != nil || unset != 0 {
		t.Fatalf("events of tasks and documents without an origin: %d (%v)", unset, err)
	}
	if err := s.SaveTaskMemory(ctx, store.TaskMemory{TaskID: tasks[1].ID, Client: "acme", ContextSummary: "after"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, store.Event{Client: "acme", Aggregate: "poll", AggregateID: "mail", Type: "poll.finished"}); err != nil {
		t.Fatal(err)
	}
	types := func(id string) string {
		t.Helper()
		evs, err := s.ListEvents(ctx, store.EventQuery{Client: "acme", AggregateID: id})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			if e.AggregateID != id {
				t.Fatalf("%s's events: one of %s", id, e.AggregateID)
			}
			out = append(out, e.Type)
		}
		return strings.Join(out, " ")
	}
	for id, want := range map[string]string{
		put[1].Stored.ID: store.EventDocumentStored,
		tasks[0].ID:      store.EventTaskCreated,
		tasks[1].ID:      store.EventTaskCreated + " " + store.EventTaskMemorySaved,
		"mail":           "poll.finished poll.finished",
	} {
		if got := types(id); got != want {
			t.Errorf("events of %s: %q, want %q", id, got, want)
		}
	}
}

// undo15 brings back the indexes migration 15 drops.
const undo15 = `CREATE INDEX tasks_client ON tasks (client, state); CREATE INDEX documents_client ON documents (client, state);`

// undo14 takes a store back to its identity facts' schema before
// migration 14 (their rows empty).
const undo14 = `DROP TABLE identity_sources; DROP TABLE identity_refs;
CREATE TABLE identity_facts (client TEXT NOT NULL, source TEXT NOT NULL, ref TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL,
	evidence TEXT NOT NULL, seen INTEGER NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (client, source, ref, kind, value)) STRICT, WITHOUT ROWID;
CREATE INDEX identity_facts_ref ON identity_facts (client, ref);`

// A store written before migration 14 keeps every identity fact when a
// source's facts move into one row: listed in the same order, with the same
// evidence (bytes that are not UTF-8 included) and times, found by ref, and
// replaced as before.
func TestIdentityFactsMoveToSourceRows(t *testing.T) {
	ctx := t.Context()
	seen := time.Date(2026, 3, 1, 8, 0, 0, 123456000, time.UTC)
	var want []store.IdentityFact
	for i, src := range []string{"jira:ops-2", "email:<a@b>", "jira:ops-1"} {
		want = append(want,
			store.IdentityFact{Source: src, Ref: "person:zed", Kind: store.FactName, Value: "zed", Evidence: "From: Zed \"Z\" \xff\x01 <zed@x.test>", Seen: seen.Add(time.Duration(i) * time.Hour)},
			store.IdentityFact{Source: src, Ref: "person:ann", Kind: store.FactEmail, Value: "ann@x.test", Evidence: "To: ann@x.test", Seen: seen},
			store.IdentityFact{Source: src, Ref: "person:ann", Kind: store.FactAccount, Value: "jira:ann", Evidence: "Assignee: ann", Seen: seen})
	}
	path := sqlitedbtest.WrittenBefore(t, FileName, migrations[:13], func(ctx context.Context, tx sqlitedb.Tx) error {
		for _, f := range want {
			if _, err := tx.ExecContext(ctx, `INSERT INTO identity_facts (client, source, ref, kind, value, evidence, seen, updated_at) VALUES ('acme', ?, ?, ?, ?, ?, ?, 1)`,
				f.Source, f.Ref, f.Kind, f.Value, f.Evidence, sqlitedb.Micros(f.Seen)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO identity_facts (client, source, ref, kind, value, evidence, seen, updated_at) VALUES ('globex', 'jira:ops-1', 'person:bob', 'name', 'bob', 'x', 1, 1)`)
		return err
	})

	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slices.SortFunc(want, store.CompareFacts)
	got, err := s.ListIdentityFacts(ctx, "acme")
	if err != nil || !store.SameFacts(got, want) {
		t.Fatalf("after the migration (%v):\n%+v\nwant\n%+v", err, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("fact %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if zed, err := s.IdentityFactsOf(ctx, "acme", []string{"person:zed"}, 10); err != nil || len(zed) != 3 || zed[0].Source != "email:<a@b>" || zed[2].Evidence != want[8].Evidence {
		t.Fatalf("facts of person:zed: %+v (%v)", zed, err)
	}
	if bob, err := s.IdentityFactsOf(ctx, "globex", []string{"person:bob"}, 10); err != nil || len(bob) != 1 || bob[0].Seen != sqlitedb.Time(1) {
		t.Fatalf("globex's facts of person:bob: %+v (%v)", bob, err)
	}
	// A source that stops naming a ref is no longer found by it.
	if err := s.PutIdentityFacts(ctx, "acme", "jira:ops-1", []store.IdentityFact{want[3]}); err != nil {
		t.Fatal(err)
	}
	if zed, err := s.IdentityFactsOf(ctx, "acme", []string{"person:zed"}, 10); err != nil || len(zed) != 2 {
		t.Fatalf("facts of person:zed after jira:ops-1 dropped it: %+v (%v)", zed, err)
	}
	if _, err := s.db.Query(ctx, `SELECT 1 FROM identity_facts`); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("the fact rows are still there: %v", err)
	}
}
