package indexers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
)

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func email(id, body string, meta map[string]any) store.Document {
	return store.Document{Client: "acme", SourceType: store.SourceEmail, Connection: "mail", ExternalID: id, Raw: []byte(id + body),
		Normalized: store.Normalized{Title: "Subject " + id, Body: body, Metadata: meta}}
}

// runUntilIndexed runs the indexer loop until no document is NEW or INDEXING.
func runUntilIndexed(t testing.TB, s *sqlite.Store) {
	t.Helper()
	runUntilIndexedWith(t, s, nil)
}

// runUntilIndexedWith is runUntilIndexed with links triaged by links.
func runUntilIndexedWith(t testing.TB, s *sqlite.Store, links indexers.LinkTriage) {
	t.Helper()
	w, err := indexers.New(s, indexers.Config{PollInterval: 10 * time.Millisecond, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	w.Wake()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Documents["NEW"]+st.Documents["INDEXING"] == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond) // Stats scans every row: not too often
	}
	cancel()
	wg.Wait()
}

func TestIndexerMakesOneDataTaskAndOneTaskPerDistinctLink(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	docs := []store.Document{
		email("m1", "Please check https://wiki.acme.test/runbook and https://WIKI.acme.test/runbook#x, and mail ann@acme.test.", map[string]any{"from": "bob@acme.test"}),
		email("m2", "HTML only.", map[string]any{"html": `<p>See <a href="https://grafana.acme.test/d/1?utm_source=x">the dashboard</a> <a href="mailto:a@b.test">mail</a></p>`}),
		email("m3", "No links here at all.", nil),
	}
	docs[2].Normalized.Links = []store.Link{{URL: "https://jira.acme.test/browse/OPS-1", Context: "given by the poller"}}
	docs[0].Priority = store.PriorityLive // its tasks are claimed before the others'
	for _, d := range docs {
		if _, _, err := s.PutDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	runUntilIndexed(t, s)
	st, _ := s.Stats(ctx)
	if st.Documents["INDEXED"] != 3 || st.TasksByKind["DATA_PROCESSING"]["NEW"] != 3 || st.TasksByKind["LINK_PROCESSING"]["NEW"] != 3 {
		t.Fatalf("documents %v tasks %v", st.Documents, st.TasksByKind)
	}
	m1 := store.DocumentID("acme", store.SourceEmail, "m1", store.ContentHash(docs[0].Raw))
	task, err := s.GetTask(ctx, "acme", store.TaskID(m1, store.KindData, ""))
	if err != nil {
		t.Fatal(err)
	}
	var data store.DataPayload
	json.Unmarshal(task.Payload, &data)
	if data.Summary != "this email (m1, version 1) contains 1 link: https://wiki.acme.test/runbook" || len(data.Links) != 1 {
		t.Fatalf("data payload %+v", data)
	}
	link, err := s.GetTask(ctx, "acme", store.TaskID(m1, store.KindLink, "https://wiki.acme.test/runbook"))
	if err != nil {
		t.Fatal(err)
	}
	var lp store.LinkPayload
	json.Unmarshal(link.Payload, &lp)
	if lp.SourceDoc != m1 || lp.From != "bob@acme.test" || lp.Title != "Subject m1" || !strings.Contains(lp.Context, "Please check") {
		t.Fatalf("link payload %+v", lp)
	}
	if task.Priority != store.PriorityLive || link.Priority != store.PriorityLive {
		t.Fatalf("the live document's tasks have priorities %d and %d", task.Priority, link.Priority)
	}
	m3 := store.DocumentID("acme", store.SourceEmail, "m3", store.ContentHash(docs[2].Raw))
	if bulk, err := s.GetTask(ctx, "acme", store.TaskID(m3, store.KindData, "")); err != nil || bulk.Priority != store.PriorityBulk {
		t.Fatalf("a bulk document's task: priority %d, %v", bulk.Priority, err)
	}

	// The same documents again: no new versions, no new tasks.
	for _, d := range docs {
		if _, created, err := s.PutDocument(ctx, d); err != nil || created {
			t.Fatalf("re-put created=%v err=%v", created, err)
		}
	}
	runUntilIndexed(t, s)
	again, _ := s.Stats(ctx)
	if again.Tasks["NEW"] != 6 || again.Documents["INDEXED"] != 3 {
		t.Fatalf("after re-import: %v %v", again.Documents, again.Tasks)
	}
}

// A link the triage records with its document gets its LINK_PROCESSING
// task made DONE (never to be claimed), and the document's
// DATA_PROCESSING task carries it; the others' tasks are NEW. The triage
// is asked once per client in a batch.
func TestIndexerMakesRecordedLinksTasksDone(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	var asked atomic.Int32
	triage := func(_ context.Context, client string) (func(string) bool, error) {
		asked.Add(1)
		return func(url string) bool { return !strings.Contains(url, "wiki.acme.test") }, nil
	}
	doc := email("m1", "See https://wiki.acme.test/runbook and https://github.com/acme/app/issues/7 (the bug).", nil)
	other := email("m2", "See https://github.com/acme/app/issues/8.", nil)
	for _, d := range []store.Document{doc, other} {
		if _, _, err := s.PutDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	runUntilIndexedWith(t, s, triage)
	id := store.DocumentID("acme", store.SourceEmail, "m1", store.ContentHash(doc.Raw))
	safe, err := s.GetTask(ctx, "acme", store.TaskID(id, store.KindLink, "https://wiki.acme.test/runbook"))
	if err != nil || safe.State != store.TaskNew {
		t.Fatalf("the SAFE link's task: %s %v", safe.State, err)
	}
	issue := "https://github.com/acme/app/issues/7"
	rec, err := s.GetTask(ctx, "acme", store.TaskID(id, store.KindLink, issue))
	if err != nil || rec.State != store.TaskDone || rec.Attempts != 0 {
		t.Fatalf("the recorded link's task: %s, %d attempts, %v", rec.State, rec.Attempts, err)
	}
	data, _ := s.GetTask(ctx, "acme", store.TaskID(id, store.KindData, ""))
	var p store.DataPayload
	json.Unmarshal(data.Payload, &p)
	if len(p.Links) != 2 || len(p.Recorded) != 1 || p.Recorded[0] != (store.RecordedLink{Task: rec.ID, URL: issue, Context: "See https://wiki.acme.test/runbook and https://github.com/acme/app/issues/7 (the bug)."}) {
		t.Fatalf("data payload %+v", p)
	}
	evs, err := s.ListEvents(ctx, store.EventQuery{Client: "acme", AggregateID: rec.ID})
	if err != nil || len(evs) != 1 || evs[0].Type != store.EventTaskCreated || !strings.Contains(string(evs[0].Data), `"state":"DONE"`) {
		t.Fatalf("the recorded link's task's events: %+v %v", evs, err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the triage was asked %d times for one client's two documents in one batch", n)
	}
}

// BenchmarkIndex reports documents/s stored and indexed into tasks on the
// embedded store (emails with two links each).
func BenchmarkIndex(b *testing.B) {
	s := openStore(b)
	ctx := context.Background()
	docs := make([]store.Document, b.N)
	for i := range docs {
		docs[i] = email(fmt.Sprint("bench-", i), fmt.Sprintf("Ticket OPS-%d is blocked, see https://jira.acme.test/browse/OPS-%d and https://wiki.acme.test/p/%d for the plan.", i, i, i%50), map[string]any{"from": "ann@acme.test"})
	}
	b.ResetTimer()
	for _, d := range docs {
		if _, _, err := s.PutDocument(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	put := b.Elapsed()
	runUntilIndexed(b, s)
	b.StopTimer()
	st, _ := s.Stats(ctx)
	if st.Documents["INDEXED"] != int64(b.N) {
		b.Fatalf("indexed %d of %d", st.Documents["INDEXED"], b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(b.N)/(b.Elapsed()-put).Seconds(), "indexed-docs/s")
}
