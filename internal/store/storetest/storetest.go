// Package storetest is the conformance suite every store backend must pass.
//
// A backend's tests call Exercise with a constructor that returns a fresh,
// empty store for each call (a new file, database or collection prefix named
// from t.Name()) and cleans it up with t.Cleanup.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) store.Store

// Caps are what a server may lack; the cases that need it run only where
// it is there.
type Caps struct {
	// AtomicUpdates: a conditional single-record update is atomic (MongoDB
	// and SQLite; FerretDB v1 reads and then writes, so two racing
	// compare-and-sets can both win).
	AtomicUpdates bool
}

// All is every capability.
var All = Caps{AtomicUpdates: true}

// Exercise runs the whole suite.
func Exercise(t *testing.T, newStore NewStore) { ExerciseCaps(t, newStore, All) }

// ExerciseCaps runs the cases the server's capabilities allow.
func ExerciseCaps(t *testing.T, newStore NewStore, caps Caps) {
	t.Run("DocumentsIdempotentPut", func(t *testing.T) { t.Parallel(); testDocumentPut(t, newStore(t)) })
	t.Run("DocumentsValidation", func(t *testing.T) { t.Parallel(); testDocumentValidation(t, newStore(t)) })
	t.Run("DocumentsClaimAndRescue", func(t *testing.T) { t.Parallel(); testDocumentClaim(t, newStore(t)) })
	t.Run("DocumentTransitions", func(t *testing.T) { t.Parallel(); testDocumentTransitions(t, newStore) })
	t.Run("TasksIdempotentEnqueue", func(t *testing.T) { t.Parallel(); testTaskEnqueue(t, newStore(t)) })
	t.Run("TaskClaimOrderAndRunAfter", func(t *testing.T) { t.Parallel(); testTaskClaim(t, newStore(t)) })
	t.Run("TaskTransitions", func(t *testing.T) { t.Parallel(); testTaskTransitions(t, newStore) })
	t.Run("TaskEventsInOrder", func(t *testing.T) { t.Parallel(); testTaskEvents(t, newStore(t)) })
	t.Run("TaskLeases", func(t *testing.T) { t.Parallel(); testTaskLeases(t, newStore(t)) })
	if caps.AtomicUpdates {
		t.Run("ConcurrentClaims", func(t *testing.T) { t.Parallel(); testConcurrentClaims(t, newStore(t)) })
	}
	t.Run("TaskMemory", func(t *testing.T) { t.Parallel(); testTaskMemory(t, newStore(t)) })
	t.Run("Events", func(t *testing.T) { t.Parallel(); testEvents(t, newStore(t)) })
	t.Run("Aliases", func(t *testing.T) { t.Parallel(); testAliases(t, newStore(t)) })
	t.Run("Cursors", func(t *testing.T) { t.Parallel(); testCursors(t, newStore(t)) })
	t.Run("ClientsAndKeys", func(t *testing.T) { t.Parallel(); testClients(t, newStore(t)) })
	t.Run("Stats", func(t *testing.T) { t.Parallel(); testStats(t, newStore(t)) })
	t.Run("LinkPatterns", func(t *testing.T) { t.Parallel(); testLinkPatterns(t, newStore(t)) })
	t.Run("ModelCache", func(t *testing.T) { t.Parallel(); testModelCache(t, newStore(t)) })
	t.Run("ListingPages", func(t *testing.T) { t.Parallel(); testListingPages(t, newStore(t)) })
	t.Run("DegradedDocuments", func(t *testing.T) { t.Parallel(); testDegradedDocuments(t, newStore(t)) })
	t.Run("ClientNamespaces", func(t *testing.T) { t.Parallel(); testClientNamespaces(t, newStore(t)) })
}

// testDegradedDocuments: a document kept with parser warnings is listed by
// DocumentQuery.Degraded (its client's only) and counted in Stats.Degraded,
// whatever state it is in.
func testDegradedDocuments(t *testing.T, s store.Store) {
	warned := doc("acme", "warned", "body with a bad part")
	warned.Normalized.Warnings = []string{"part 2 (text/plain; charset=x-klingon): unknown charset, decoded as windows-1252"}
	w, _ := mustPut(t, s, warned)
	mustPut(t, s, doc("acme", "clean", "clean body"))
	other := doc("globex", "warned", "other")
	other.Normalized.Warnings = []string{"body cut at 8 MiB"}
	mustPut(t, s, other)
	got := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme", Degraded: true}))(t)
	if len(got) != 1 || got[0].ID != w.ID || !slices.Equal(got[0].Normalized.Warnings, warned.Normalized.Warnings) {
		t.Fatalf("degraded listing: %+v", got)
	}
	if all := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme"}))(t); len(all) != 2 {
		t.Fatalf("all documents: %d", len(all))
	}
	if st := must(s.Stats(ctx(t)))(t); st.Degraded != 2 {
		t.Fatalf("stats: %d degraded, want 2", st.Degraded)
	}
}

// testClientNamespaces: a client's declared namespaces are stored sorted
// and without repeats, replaced as a whole, validated, and an unknown
// client is not found.
func testClientNamespaces(t *testing.T, s store.Store) {
	must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Acme", Namespaces: []string{"order", "customer", "order"}}))(t)
	if c := must(s.GetClient(ctx(t), "acme"))(t); !slices.Equal(c.Namespaces, []string{"customer", "order"}) {
		t.Fatalf("created with %v", c.Namespaces)
	}
	c := must(s.SetClientNamespaces(ctx(t), "acme", []string{"invoice"}))(t)
	if !slices.Equal(c.Namespaces, []string{"invoice"}) || c.Name != "Acme" {
		t.Fatalf("set: %+v", c)
	}
	if cs := must(s.ListClients(ctx(t)))(t); len(cs) != 1 || !slices.Equal(cs[0].Namespaces, []string{"invoice"}) {
		t.Fatalf("list: %+v", cs)
	}
	if c := must(s.SetClientNamespaces(ctx(t), "acme", nil))(t); c.Namespaces != nil {
		t.Fatalf("cleared: %v", c.Namespaces)
	}
	for _, bad := range [][]string{{"Order"}, {"x"}, {"has space"}, {"1st"}} {
		if _, err := s.SetClientNamespaces(ctx(t), "acme", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("namespaces %q: err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.PutClient(ctx(t), store.Client{ID: "globex", Namespaces: []string{"Bad!"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("put with a bad namespace: %v", err)
	}
	if _, err := s.SetClientNamespaces(ctx(t), "nobody", []string{"order"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}

// testListingPages pages through documents and tasks two at a time while
// more are added ahead: every item shows once, in order, the client's only.
func testListingPages(t *testing.T, s store.Store) {
	var docIDs []string
	for i := range 7 {
		d, _ := mustPut(t, s, doc("acme", fmt.Sprint("page-", i), fmt.Sprint("body ", i)))
		docIDs = append(docIDs, d.ID)
		must(s.EnqueueTasks(ctx(t), task("acme", d.ID)))(t)
		mustPut(t, s, doc("globex", fmt.Sprint("page-", i), "other"))
	}
	var seen []string
	var after *store.Position
	for page := 0; ; page++ {
		got := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme", Limit: 2, After: after}))(t)
		if len(got) == 0 {
			break
		}
		for _, d := range got {
			if d.Client != "acme" {
				t.Fatalf("page %d lists %s's document", page, d.Client)
			}
			seen = append(seen, d.ID)
		}
		last := got[len(got)-1]
		after = &store.Position{UpdatedAt: last.UpdatedAt, ID: last.ID}
		if page == 0 { // a new document arrives: it sorts ahead, not into the pages to come
			mustPut(t, s, doc("acme", "late", "late"))
		}
	}
	slices.Sort(seen)
	want := slices.Sorted(slices.Values(docIDs))
	if !slices.Equal(seen, want) {
		t.Fatalf("pages listed %d documents %v, want the 7 there were at the start %v", len(seen), seen, want)
	}
	var tasks []store.Task
	after = nil
	for {
		got := must(s.ListTasks(ctx(t), store.TaskQuery{Client: "acme", Kind: store.KindData, State: store.TaskNew, Limit: 3, After: after}))(t)
		if len(got) == 0 {
			break
		}
		tasks = append(tasks, got...)
		after = &store.Position{UpdatedAt: got[len(got)-1].UpdatedAt, ID: got[len(got)-1].ID}
	}
	if len(tasks) != 7 {
		t.Fatalf("task pages: %d tasks, want 7", len(tasks))
	}
	for i := 1; i < len(tasks); i++ {
		if tasks[i].UpdatedAt.After(tasks[i-1].UpdatedAt) {
			t.Fatalf("tasks out of order at %d", i)
		}
	}
	if one := must(s.ListTasks(ctx(t), store.TaskQuery{Client: "acme", SourceDoc: docIDs[3]}))(t); len(one) != 1 || one[0].SourceDoc != docIDs[3] {
		t.Fatalf("tasks of one document: %+v", one)
	}
	if other := must(s.ListTasks(ctx(t), store.TaskQuery{Client: "globex"}))(t); len(other) != 0 {
		t.Fatalf("globex lists acme's tasks: %d", len(other))
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

// must(call())(t) returns call's value, failing t on its error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func doc(client, ext, body string) store.Document {
	return store.Document{
		Client: client, SourceType: store.SourceEmail, Connection: "mail", ExternalID: ext,
		Raw:        []byte(body),
		Normalized: store.Normalized{Title: "subject " + ext, Body: body, Metadata: map[string]any{"from": "ann@example.com"}, Links: []store.Link{{URL: "https://example.com/" + ext}}},
	}
}

func task(client, docID string) store.Task {
	return store.Task{Kind: store.KindData, Client: client, SourceDoc: docID, Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 3}
}

func testDocumentPut(t *testing.T, s store.Store) {
	d1, created := mustPut(t, s, doc("acme", "msg-1", "hello"))
	if !created || d1.Version != 1 || d1.State != store.DocNew || d1.ID == "" {
		t.Fatalf("first put: created=%v version=%d state=%s id=%q", created, d1.Version, d1.State, d1.ID)
	}
	again, created := mustPut(t, s, doc("acme", "msg-1", "hello"))
	if created || again.ID != d1.ID || again.Version != 1 {
		t.Fatalf("same content again: created=%v id=%s version=%d, want no-op on %s v1", created, again.ID, again.Version, d1.ID)
	}
	d2, created := mustPut(t, s, doc("acme", "msg-1", "hello, edited"))
	if !created || d2.Version != 2 || d2.ID == d1.ID {
		t.Fatalf("changed content: created=%v version=%d id=%s", created, d2.Version, d2.ID)
	}
	// Same external item for another client is independent.
	other, created := mustPut(t, s, doc("globex", "msg-1", "hello"))
	if !created || other.Version != 1 || other.ID == d1.ID {
		t.Fatalf("other client: created=%v version=%d id=%s", created, other.Version, other.ID)
	}
	got := must(s.GetDocument(ctx(t), "acme", d1.ID))(t)
	if got.Normalized.Title != "subject msg-1" || string(got.Raw) != "hello" || got.ContentHash != store.ContentHash([]byte("hello")) ||
		got.Normalized.Metadata["from"] != "ann@example.com" || len(got.Normalized.Links) != 1 || got.MaxAttempts != store.DefaultMaxAttempts {
		t.Fatalf("round trip lost fields: %+v", got)
	}
	if _, err := s.GetDocument(ctx(t), "globex", d1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another client's document: err = %v, want ErrNotFound", err)
	}
	versions := must(s.ListDocumentVersions(ctx(t), "acme", store.SourceEmail, "msg-1"))(t)
	if len(versions) != 2 || versions[0].Version != 1 || versions[1].Version != 2 {
		t.Fatalf("versions = %d", len(versions))
	}
	stored := eventsOf(t, s, d1.ID, store.EventDocumentStored)
	if len(stored) != 1 {
		t.Fatalf("document.stored events for %s = %d, want 1 (the no-op put must not log)", d1.ID, len(stored))
	}
}

func mustPut(t *testing.T, s store.Store, d store.Document) (store.Document, bool) {
	t.Helper()
	got, created, err := s.PutDocument(ctx(t), d)
	if err != nil {
		t.Fatal(err)
	}
	return got, created
}

func testDocumentValidation(t *testing.T, s store.Store) {
	for _, tc := range []struct {
		name  string
		doc   store.Document
		field string
	}{
		{"no client", store.Document{SourceType: store.SourceFile, ExternalID: "x", Raw: []byte("x")}, "client"},
		{"bad source", store.Document{Client: "a", SourceType: "fax machine", ExternalID: "x", Raw: []byte("x")}, "sourceType"},
		{"no external id", store.Document{Client: "a", SourceType: store.SourceFile, Raw: []byte("x")}, "externalId"},
		{"no content", store.Document{Client: "a", SourceType: store.SourceFile, ExternalID: "x"}, "raw"},
	} {
		_, _, err := s.PutDocument(ctx(t), tc.doc)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want ErrInvalid naming %q", tc.name, err, tc.field)
		}
	}
	if _, err := s.EnqueueTasks(ctx(t), store.Task{Client: "a", Kind: "BOGUS", SourceDoc: "d"}); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "kind") {
		t.Errorf("bad kind: err = %v", err)
	}
	if _, err := s.EnqueueTasks(ctx(t), store.Task{Client: "a", Kind: store.KindLink, SourceDoc: "d"}); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "payload.url") {
		t.Errorf("link task without url: err = %v", err)
	}
	st := must(s.Stats(ctx(t)))(t)
	if st.Documents[string(store.DocNew)] != 0 || st.Tasks[string(store.TaskNew)] != 0 {
		t.Errorf("invalid input was stored: %+v", st)
	}
}

func claimAt(now time.Time, owner string, limit int) store.Claim {
	return store.Claim{Owner: owner, Limit: limit, Now: now, LeaseUntil: now.Add(time.Minute)}
}

func testDocumentClaim(t *testing.T, s store.Store) {
	now := time.Now()
	for i := range 5 {
		mustPut(t, s, doc("acme", fmt.Sprint("m", i), fmt.Sprint("body", i)))
	}
	a := must(s.ClaimDocuments(ctx(t), claimAt(now, "A", 3)))(t)
	b := must(s.ClaimDocuments(ctx(t), claimAt(now, "B", 10)))(t)
	if len(a) != 3 || len(b) != 2 {
		t.Fatalf("claimed %d + %d, want 3 + 2", len(a), len(b))
	}
	for _, d := range append(a, b...) {
		if d.State != store.DocIndexing || d.Attempts != 1 || d.LeaseOwner == "" {
			t.Fatalf("claimed doc: state=%s attempts=%d owner=%q", d.State, d.Attempts, d.LeaseOwner)
		}
	}
	if more := must(s.ClaimDocuments(ctx(t), claimAt(now, "C", 10)))(t); len(more) != 0 {
		t.Fatalf("claimed %d leased documents again", len(more))
	}
	// B's lease expires; A extends its own.
	if n := must(s.ExtendDocumentLeases(ctx(t), "A", ids(a), now.Add(time.Hour)))(t); n != 3 {
		t.Fatalf("extended %d, want 3", n)
	}
	if n := must(s.ExtendDocumentLeases(ctx(t), "B", ids(a), now.Add(time.Hour)))(t); n != 0 {
		t.Fatalf("B extended %d of A's leases", n)
	}
	if n := must(s.RescueDocuments(ctx(t), now.Add(2*time.Minute)))(t); n != 2 {
		t.Fatalf("rescued %d, want B's 2", n)
	}
	again := must(s.ClaimDocuments(ctx(t), claimAt(now.Add(2*time.Minute), "C", 10)))(t)
	if len(again) != 2 || again[0].Attempts != 2 {
		t.Fatalf("reclaimed %d (attempts %d), want 2 at attempt 2", len(again), again[0].Attempts)
	}
	// B acks late: its lease is gone.
	err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: b[0].ID, From: store.DocIndexing, To: store.DocIndexed, Owner: "B"}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale owner ack: err = %v, want ErrConflict", err)
	}
	// A finishes one, quarantines one with a reason, releases one.
	err = s.TransitionDocuments(ctx(t), []store.DocumentTransition{
		{ID: a[0].ID, From: store.DocIndexing, To: store.DocIndexed, Owner: "A"},
		{ID: a[1].ID, From: store.DocIndexing, To: store.DocQuarantined, Owner: "A", Error: &store.ErrorInfo{Class: "malformed", Message: "bad MIME"}},
		{ID: a[2].ID, From: store.DocIndexing, To: store.DocNew, Owner: "A", RefundAttempt: true, Reason: "shutdown"},
	})
	if err != nil {
		t.Fatal(err)
	}
	q := must(s.GetDocument(ctx(t), "acme", a[1].ID))(t)
	if q.State != store.DocQuarantined || q.Error == nil || q.Error.Message != "bad MIME" {
		t.Fatalf("quarantined doc: %+v", q)
	}
	r := must(s.GetDocument(ctx(t), "acme", a[2].ID))(t)
	if r.State != store.DocNew || r.Attempts != 0 || r.LeaseOwner != "" {
		t.Fatalf("released doc: state=%s attempts=%d owner=%q", r.State, r.Attempts, r.LeaseOwner)
	}
	// Listing by state shows the quarantine reason, without the raw bytes.
	qs := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme", State: store.DocQuarantined}))(t)
	if len(qs) != 1 || qs[0].ID != a[1].ID || qs[0].Error == nil || qs[0].Error.Message != "bad MIME" || qs[0].Raw != nil {
		t.Fatalf("list quarantined: %+v", qs)
	}
	if all := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme", Limit: 2}))(t); len(all) != 2 {
		t.Fatalf("limit: %d", len(all))
	}
	if other := must(s.ListDocuments(ctx(t), store.DocumentQuery{Client: "globex"}))(t); len(other) != 0 {
		t.Fatalf("another client's documents listed: %d", len(other))
	}
	// A document whose attempts are spent is quarantined by the rescuer.
	d, _ := mustPut(t, s, store.Document{Client: "acme", SourceType: store.SourceFile, ExternalID: "poison", Raw: []byte("p"), MaxAttempts: 1})
	for {
		got := must(s.ClaimDocuments(ctx(t), claimAt(now.Add(3*time.Minute), "D", 10)))(t)
		if slices.ContainsFunc(got, func(x store.Document) bool { return x.ID == d.ID }) {
			break
		}
		if len(got) == 0 {
			t.Fatal("poison document never claimed")
		}
	}
	must(s.RescueDocuments(ctx(t), now.Add(time.Hour)))(t)
	p := must(s.GetDocument(ctx(t), "acme", d.ID))(t)
	if p.State != store.DocQuarantined || p.Error == nil || p.Error.Class != "lease_expired" || !p.Error.Recoverable {
		t.Fatalf("poison doc after rescue: state=%s err=%+v", p.State, p.Error)
	}
}

func ids[T interface{ store.Document | store.Task }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		switch v := any(x).(type) {
		case store.Document:
			out[i] = v.ID
		case store.Task:
			out[i] = v.ID
		}
	}
	return out
}

// docPath lists how to reach each document state from NEW.
var docPath = map[store.DocumentState][]store.DocumentState{
	store.DocNew:         nil,
	store.DocIndexing:    {store.DocIndexing},
	store.DocIndexed:     {store.DocIndexing, store.DocIndexed},
	store.DocQuarantined: {store.DocIndexing, store.DocQuarantined},
}

func testDocumentTransitions(t *testing.T, newStore NewStore) {
	for _, from := range store.DocumentStates {
		for _, to := range store.DocumentStates {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				s := newStore(t)
				d, _ := mustPut(t, s, doc("acme", "x", "x"))
				cur := store.DocNew
				for _, next := range docPath[from] {
					driveDoc(t, s, d.ID, cur, next)
					cur = next
				}
				before := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: d.ID}))(t))
				var err error
				if to == store.DocIndexing {
					var got []store.Document
					got, err = s.ClaimDocuments(ctx(t), claimAt(time.Now(), "w", 1))
					if err == nil && len(got) == 0 {
						err = store.ErrIllegalTransition
					}
				} else {
					err = s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: d.ID, From: from, To: to}})
				}
				legal := store.CanTransitionDocument(from, to)
				after := must(s.GetDocument(ctx(t), "acme", d.ID))(t)
				events := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: d.ID}))(t))
				switch {
				case legal && err != nil:
					t.Fatalf("legal %s -> %s failed: %v", from, to, err)
				case legal && (after.State != to || events != before+1):
					t.Fatalf("legal %s -> %s: state %s, %d new events", from, to, after.State, events-before)
				case !legal && !errors.Is(err, store.ErrIllegalTransition):
					t.Fatalf("illegal %s -> %s: err = %v, want ErrIllegalTransition", from, to, err)
				case !legal && (after.State != from || events != before):
					t.Fatalf("illegal %s -> %s changed something: state %s, %d new events", from, to, after.State, events-before)
				}
			})
		}
	}
}

func driveDoc(t *testing.T, s store.Store, id string, from, to store.DocumentState) {
	t.Helper()
	if to == store.DocIndexing {
		if got := must(s.ClaimDocuments(ctx(t), claimAt(time.Now(), "w", 1)))(t); len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim %s: got %d", id, len(got))
		}
		return
	}
	if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: id, From: from, To: to}}); err != nil {
		t.Fatal(err)
	}
}

func testTaskEnqueue(t *testing.T, s store.Store) {
	n := must(s.EnqueueTasks(ctx(t), task("acme", "d1"), task("acme", "d2")))(t)
	if n != 2 {
		t.Fatalf("enqueued %d, want 2", n)
	}
	if n := must(s.EnqueueTasks(ctx(t), task("acme", "d1"), task("acme", "d2")))(t); n != 0 {
		t.Fatalf("re-enqueue created %d, want 0", n)
	}
	link := store.Task{Kind: store.KindLink, Client: "acme", SourceDoc: "d1", Payload: json.RawMessage(`{"url":"https://a.example/x"}`)}
	link2 := link
	link2.Payload = json.RawMessage(`{"url":"https://a.example/y"}`)
	if n := must(s.EnqueueTasks(ctx(t), link, link2, link))(t); n != 2 {
		t.Fatalf("two distinct links enqueued %d", n)
	}
	id := store.TaskID("d1", store.KindData, "")
	got := must(s.GetTask(ctx(t), "acme", id))(t)
	if got.State != store.TaskNew || got.MaxAttempts != 3 || string(got.Payload) != `{"n":1}` || got.CorrelationID == "" || got.CreatedAt.IsZero() {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := s.GetTask(ctx(t), "globex", id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another client's task: err = %v", err)
	}
	if c := eventsOf(t, s, id, store.EventTaskCreated); len(c) != 1 {
		t.Fatalf("task.created events = %d, want 1", len(c))
	}
}

func testTaskClaim(t *testing.T, s store.Store) {
	now := time.Now()
	low, high := task("acme", "low"), task("acme", "high")
	high.Priority = 10
	later := task("acme", "later")
	must(s.EnqueueTasks(ctx(t), low, high, later))(t)
	got := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 1)))(t)
	if len(got) != 1 || got[0].SourceDoc != "high" || got[0].State != store.TaskQualifying || got[0].Attempts != 1 {
		t.Fatalf("first claim: %+v", got)
	}
	// Nothing is READY_FOR_GPU yet.
	if ex := must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t); len(ex) != 0 {
		t.Fatalf("executor claimed %d", len(ex))
	}
	// Retry "high" one hour out: not claimable before then.
	runAfter := now.Add(time.Hour)
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: got[0].ID, From: store.TaskQualifying, To: store.TaskRetry, Owner: "q", RunAfter: runAfter, Error: &store.ErrorInfo{Class: "transient", Message: "timeout"}}}); err != nil {
		t.Fatal(err)
	}
	rest := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 10)))(t)
	if len(rest) != 2 {
		t.Fatalf("claimed %d, want the 2 without a future runAfter", len(rest))
	}
	r := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(runAfter.Add(time.Second), "q", 10)))(t)
	if len(r) != 1 || r[0].ID != got[0].ID || r[0].Attempts != 2 || r[0].LastError == nil || r[0].LastError.Message != "timeout" {
		t.Fatalf("retry claim: %+v", r)
	}
	// Route to the GPU: attempts start afresh; the executor claims it.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: r[0].ID, From: store.TaskQualifying, To: store.TaskReadyForGPU, Owner: "q", ResetAttempts: true}}); err != nil {
		t.Fatal(err)
	}
	ex := must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t)
	if len(ex) != 1 || ex[0].State != store.TaskExecution || ex[0].Attempts != 1 {
		t.Fatalf("execute claim: %+v", ex)
	}
	// Preemption hands it back without spending an attempt.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: ex[0].ID, From: store.TaskExecution, To: store.TaskReadyForGPU, Owner: "x", RefundAttempt: true, Reason: "preempted"}}); err != nil {
		t.Fatal(err)
	}
	back := must(s.GetTask(ctx(t), "acme", ex[0].ID))(t)
	if back.State != store.TaskReadyForGPU || back.Attempts != 0 || back.LeaseOwner != "" {
		t.Fatalf("preempted: state=%s attempts=%d owner=%q", back.State, back.Attempts, back.LeaseOwner)
	}
	ex = must(s.ClaimTasks(ctx(t), store.StageExecute, claimAt(now, "x", 10)))(t)
	usage := &store.Usage{ModelCalls: 2, PromptTokens: 100}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: ex[0].ID, From: store.TaskExecution, To: store.TaskCompleted, Owner: "x", Result: json.RawMessage(`{"digest":"ok"}`), Usage: usage}}); err != nil {
		t.Fatal(err)
	}
	done := must(s.GetTask(ctx(t), "acme", ex[0].ID))(t)
	if done.State != store.TaskCompleted || string(done.Result) != `{"digest":"ok"}` || done.Usage.ModelCalls != 2 || done.Attempts != 1 {
		t.Fatalf("completed: %+v", done)
	}
	if _, err := s.ClaimTasks(ctx(t), store.StageQualify, store.Claim{Owner: "", Limit: 1, Now: now, LeaseUntil: now.Add(time.Second)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim without owner: err = %v", err)
	}
}

// taskPath lists how to reach each task state from NEW.
var taskPath = map[store.TaskState][]store.TaskState{
	store.TaskNew:         nil,
	store.TaskQualifying:  {store.TaskQualifying},
	store.TaskDone:        {store.TaskQualifying, store.TaskDone},
	store.TaskReadyForGPU: {store.TaskQualifying, store.TaskReadyForGPU},
	store.TaskExecution:   {store.TaskQualifying, store.TaskReadyForGPU, store.TaskExecution},
	store.TaskCompleted:   {store.TaskQualifying, store.TaskReadyForGPU, store.TaskExecution, store.TaskCompleted},
	store.TaskRetry:       {store.TaskQualifying, store.TaskRetry},
	store.TaskFailed:      {store.TaskQualifying, store.TaskFailed},
	store.TaskCancelled:   {store.TaskCancelled},
}

func testTaskTransitions(t *testing.T, newStore NewStore) {
	for _, from := range store.TaskStates {
		for _, to := range store.TaskStates {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				s := newStore(t)
				tk := task("acme", "d")
				must(s.EnqueueTasks(ctx(t), tk))(t)
				id := store.TaskID("d", store.KindData, "")
				cur := store.TaskNew
				for _, next := range taskPath[from] {
					driveTask(t, s, id, cur, next)
					cur = next
				}
				before := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t))
				var err error
				if stage, running := store.StageOf(to); running {
					var got []store.Task
					got, err = s.ClaimTasks(ctx(t), stage, claimAt(time.Now(), "w", 1))
					if err == nil && len(got) == 0 {
						err = store.ErrIllegalTransition
					}
				} else {
					err = s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: from, To: to}})
				}
				legal := store.CanTransitionTask(from, to)
				after := must(s.GetTask(ctx(t), "acme", id))(t)
				events := len(must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t))
				switch {
				case legal && err != nil:
					t.Fatalf("legal %s -> %s failed: %v", from, to, err)
				case legal && (after.State != to || events != before+1):
					t.Fatalf("legal %s -> %s: state %s, %d new events", from, to, after.State, events-before)
				case !legal && !errors.Is(err, store.ErrIllegalTransition):
					t.Fatalf("illegal %s -> %s: err = %v, want ErrIllegalTransition", from, to, err)
				case !legal && (after.State != from || events != before):
					t.Fatalf("illegal %s -> %s changed something: state %s, %d new events", from, to, after.State, events-before)
				}
			})
		}
	}
	t.Run("StaleFromIsConflict", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(s.EnqueueTasks(ctx(t), task("acme", "d")))(t)
		id := store.TaskID("d", store.KindData, "")
		err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: store.TaskFailed, To: store.TaskNew}})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
		// One bad item in a batch does not block the others.
		must(s.EnqueueTasks(ctx(t), task("acme", "e")))(t)
		other := store.TaskID("e", store.KindData, "")
		err = s.TransitionTasks(ctx(t), []store.TaskTransition{
			{ID: id, From: store.TaskDone, To: store.TaskNew},
			{ID: other, From: store.TaskNew, To: store.TaskCancelled},
			{ID: "missing", From: store.TaskNew, To: store.TaskCancelled},
		})
		if !errors.Is(err, store.ErrConflict) || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("batch err = %v, want ErrConflict and ErrNotFound", err)
		}
		if got := must(s.GetTask(ctx(t), "acme", other))(t); got.State != store.TaskCancelled {
			t.Fatalf("valid item in a partly bad batch: %s", got.State)
		}
	})
}

func driveTask(t *testing.T, s store.Store, id string, from, to store.TaskState) {
	t.Helper()
	if stage, running := store.StageOf(to); running {
		if got := must(s.ClaimTasks(ctx(t), stage, claimAt(time.Now(), "w", 1)))(t); len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim %s into %s: got %d", id, to, len(got))
		}
		return
	}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: id, From: from, To: to}}); err != nil {
		t.Fatal(err)
	}
}

func testTaskEvents(t *testing.T, s store.Store) {
	must(s.EnqueueTasks(ctx(t), task("acme", "d")))(t)
	id := store.TaskID("d", store.KindData, "")
	path := taskPath[store.TaskCompleted]
	cur := store.TaskNew
	for _, next := range path {
		driveTask(t, s, id, cur, next)
		cur = next
	}
	evs := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme", Aggregate: store.AggregateTask, AggregateID: id}))(t)
	var got []string
	var last int64
	for _, e := range evs {
		if e.Seq <= last {
			t.Fatalf("events out of order: seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.Type != store.EventTaskState {
			continue
		}
		var c store.StateChange
		if err := json.Unmarshal(e.Data, &c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.From+">"+c.To)
	}
	want := []string{}
	prev := store.TaskNew
	for _, next := range path {
		want = append(want, string(prev)+">"+string(next))
		prev = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("state events\n got %v\nwant %v", got, want)
	}
	if evs[0].Type != store.EventTaskCreated {
		t.Fatalf("first event %s, want %s", evs[0].Type, store.EventTaskCreated)
	}
}

func testTaskLeases(t *testing.T, s store.Store) {
	now := time.Now()
	for i := range 4 {
		tk := task("acme", fmt.Sprint("d", i))
		tk.MaxAttempts = 2
		must(s.EnqueueTasks(ctx(t), tk))(t)
	}
	got := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now, "q", 4)))(t)
	keep := ids(got[:2])
	if n := must(s.ExtendTaskLeases(ctx(t), "q", keep, now.Add(time.Hour)))(t); n != 2 {
		t.Fatalf("extended %d", n)
	}
	if n := must(s.RescueTasks(ctx(t), store.StageQualify, now.Add(2*time.Minute)))(t); n != 2 {
		t.Fatalf("rescued %d, want 2", n)
	}
	for _, tk := range got[2:] {
		r := must(s.GetTask(ctx(t), "acme", tk.ID))(t)
		if r.State != store.TaskRetry || r.LastError == nil || r.LastError.Class != "lease_expired" || r.LeaseOwner != "" {
			t.Fatalf("rescued task: state=%s err=%+v", r.State, r.LastError)
		}
	}
	// Second expiry spends the last attempt: FAILED, recoverable.
	again := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(now.Add(3*time.Minute), "q2", 10)))(t)
	if len(again) != 2 {
		t.Fatalf("reclaimed %d", len(again))
	}
	must(s.RescueTasks(ctx(t), store.StageQualify, now.Add(time.Hour)))(t)
	for _, tk := range again {
		r := must(s.GetTask(ctx(t), "acme", tk.ID))(t)
		if r.State != store.TaskFailed || !r.LastError.Recoverable {
			t.Fatalf("exhausted task: state=%s err=%+v", r.State, r.LastError)
		}
	}
	// The lease holder that kept its lease can still finish.
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: keep[0], From: store.TaskQualifying, To: store.TaskDone, Owner: "q"}}); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentClaims: several claimers racing never get the same task.
func testConcurrentClaims(t *testing.T, s store.Store) {
	const n = 300
	batch := make([]store.Task, n)
	for i := range batch {
		batch[i] = task("acme", fmt.Sprint("c", i))
	}
	must(s.EnqueueTasks(ctx(t), batch...))(t)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			owner := fmt.Sprint("w", w)
			for {
				got, err := s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), owner, 7))
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, dup := seen[tk.ID]; dup {
						errs <- fmt.Errorf("task %s claimed by %s and %s", tk.ID, prev, owner)
					}
					seen[tk.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct tasks, want %d", len(seen), n)
	}
}

func testTaskMemory(t *testing.T, s store.Store) {
	m := store.TaskMemory{
		TaskID: "t1", CorrelationID: "c1", Client: "acme", Project: "apollo", ContextSummary: "Ann asks Bob to review PR 7 by Friday.",
		GraphNodeKeys: []string{"person:ann", "person:bob"}, RAGDocumentIDs: []string{"chunk-1"},
		StructuredData: json.RawMessage(`{"deadline":"friday"}`), RoutingDecision: store.TaskReadyForGPU,
		RoutingReason: "direct request", SourceType: store.SourceEmail, SourceID: "doc-1",
		Warnings: []string{"relation jira:A|???|jira:B left out"},
	}
	if err := s.SaveTaskMemory(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	got := must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t)
	if got.ContextSummary != m.ContextSummary || !slices.Equal(got.GraphNodeKeys, m.GraphNodeKeys) || string(got.StructuredData) != string(m.StructuredData) || got.RoutingDecision != store.TaskReadyForGPU ||
		!slices.Equal(got.Warnings, m.Warnings) {
		t.Fatalf("round trip: %+v", got)
	}
	m.ContextSummary = "updated"
	if err := s.SaveTaskMemory(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t); got.ContextSummary != "updated" {
		t.Fatalf("replace: %q", got.ContextSummary)
	}
	if _, err := s.GetTaskMemory(ctx(t), "globex", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other client read: %v", err)
	}
	hijack := m
	hijack.Client = "globex"
	if err := s.SaveTaskMemory(ctx(t), hijack); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("other client overwrite: err = %v, want ErrConflict", err)
	}
	if err := s.DeleteTaskMemory(ctx(t), "globex", "t1"); err != nil {
		t.Fatal(err)
	}
	must(s.GetTaskMemory(ctx(t), "acme", "t1"))(t) // another client's delete did nothing
	if err := s.DeleteTaskMemory(ctx(t), "acme", "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTaskMemory(ctx(t), "acme", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeleteTaskMemory(ctx(t), "acme", "t1"); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
}

func testEvents(t *testing.T, s store.Store) {
	var seqs []int64
	before := must(s.LatestEventSeq(ctx(t)))(t)
	for i, c := range []string{"acme", "globex", "acme"} {
		e := must(s.AppendEvent(ctx(t), store.Event{Client: c, Aggregate: "poll", AggregateID: "mail", Type: "poll.finished", Data: json.RawMessage(fmt.Sprintf(`{"fetched":%d}`, i))}))(t)
		if latest := must(s.LatestEventSeq(ctx(t)))(t); latest != e.Seq || latest <= before {
			t.Fatalf("latest event seq %d after appending %d (was %d)", latest, e.Seq, before)
		}
		if e.Seq == 0 || e.At.IsZero() {
			t.Fatalf("append did not set seq/at: %+v", e)
		}
		seqs = append(seqs, e.Seq)
	}
	if !slices.IsSorted(seqs) {
		t.Fatalf("seqs not increasing: %v", seqs)
	}
	acme := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme"}))(t)
	if len(acme) != 2 || string(acme[1].Data) != `{"fetched":2}` {
		t.Fatalf("acme events: %+v", acme)
	}
	after := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme", AfterSeq: acme[0].Seq}))(t)
	if len(after) != 1 || after[0].Seq != acme[1].Seq {
		t.Fatalf("resume after seq: %+v", after)
	}
	if lim := must(s.ListEvents(ctx(t), store.EventQuery{Limit: 1}))(t); len(lim) != 1 {
		t.Fatalf("limit: %d", len(lim))
	}
	if _, err := s.AppendEvent(ctx(t), store.Event{Client: "acme", Aggregate: "x", Type: "y", Data: json.RawMessage(`{bad`)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad data: %v", err)
	}
}

func testAliases(t *testing.T, s store.Store) {
	if _, err := s.ResolveAlias(ctx(t), "acme", "person:annie"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown alias: %v", err)
	}
	if err := s.RecordAlias(ctx(t), "acme", "person:annie", "person:ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAlias(ctx(t), "globex", "person:annie", "person:anne_smith"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ResolveAlias(ctx(t), "acme", "person:annie"))(t); got != "person:ann" {
		t.Fatalf("acme resolves to %q", got)
	}
	if got := must(s.ResolveAlias(ctx(t), "globex", "person:annie"))(t); got != "person:anne_smith" {
		t.Fatalf("globex resolves to %q", got)
	}
	if _, err := s.ResolveAlias(ctx(t), "initech", "person:annie"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("third client sees an alias: %v", err)
	}
	if err := s.RecordAlias(ctx(t), "acme", "person:annie", "person:ann_lee"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ResolveAlias(ctx(t), "acme", "person:annie"))(t); got != "person:ann_lee" {
		t.Fatalf("re-mapped alias resolves to %q", got)
	}
}

func testCursors(t *testing.T, s store.Store) {
	if _, err := s.GetCursor(ctx(t), "imap:work/INBOX"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing cursor: %v", err)
	}
	for _, v := range []string{`{"uidvalidity":7,"uid":10}`, `{"uidvalidity":7,"uid":42}`} {
		if err := s.CommitCursor(ctx(t), "imap:work/INBOX", v); err != nil {
			t.Fatal(err)
		}
		if got := must(s.GetCursor(ctx(t), "imap:work/INBOX"))(t); got != v {
			t.Fatalf("cursor = %q, want %q", got, v)
		}
	}
	if _, err := s.GetCursor(ctx(t), "imap:work/Sent"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other cursor leaked: %v", err)
	}
}

func testClients(t *testing.T, s store.Store) {
	if created := must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Acme"}))(t); !created {
		t.Fatal("first put not created")
	}
	if created := must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Other"}))(t); created {
		t.Fatal("second put created")
	}
	if c := must(s.GetClient(ctx(t), "acme"))(t); c.Name != "Acme" {
		t.Fatalf("client renamed by idempotent put: %q", c.Name)
	}
	if _, err := s.PutClient(ctx(t), store.Client{ID: "Bad Name/.."}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	must(s.PutClient(ctx(t), store.Client{ID: "globex"}))(t)
	if cs := must(s.ListClients(ctx(t)))(t); len(cs) != 2 || cs[0].ID != "acme" {
		t.Fatalf("list: %+v", cs)
	}
	key := store.APIKey{ID: "k1", Client: "acme", Role: store.RoleClient, Name: "desktop", Hash: store.HashAPIKey("secret-1")}
	if err := s.CreateAPIKey(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx(t), store.APIKey{ID: "k2", Client: "acme", Role: store.RoleClient, Hash: store.HashAPIKey("secret-1")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	if err := s.CreateAPIKey(ctx(t), store.APIKey{ID: "k3", Role: store.RoleAdmin, Hash: "short"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unhashed key: %v", err)
	}
	got := must(s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-1")))(t)
	if got.Client != "acme" || got.Role != store.RoleClient {
		t.Fatalf("lookup: %+v", got)
	}
	if _, err := s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := s.RevokeAPIKey(ctx(t), "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAPIKey(ctx(t), "k1"); err != nil {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, err := s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key still works: %v", err)
	}
	ks := must(s.ListAPIKeys(ctx(t), "acme"))(t)
	if len(ks) != 1 || ks[0].RevokedAt.IsZero() {
		t.Fatalf("list keys: %+v", ks)
	}
	if err := s.RevokeAPIKey(ctx(t), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke missing: %v", err)
	}
}

func testStats(t *testing.T, s store.Store) {
	mustPut(t, s, doc("acme", "1", "a"))
	mustPut(t, s, doc("acme", "2", "b"))
	mustPut(t, s, store.Document{Client: "globex", SourceType: store.SourceJira, ExternalID: "J-1", Raw: []byte("j")})
	must(s.EnqueueTasks(ctx(t), task("acme", "1"), task("globex", "J-1")))(t)
	claimed := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), "q", 1)))(t)
	st := must(s.Stats(ctx(t)))(t)
	if len(st.ModelUsage) != 0 {
		t.Fatalf("model usage with no model call: %+v", st.ModelUsage)
	}
	// The claimed task finishes having spent two model calls; the other is
	// claimed and spends nothing: totals per kind cover both.
	u := &store.Usage{ModelCalls: 2, PromptTokens: 300, OutputTokens: 40, Iterations: 2}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: claimed[0].ID, From: store.TaskQualifying, To: store.TaskDone, Owner: "q", Usage: u}}); err != nil {
		t.Fatal(err)
	}
	must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), "q", 1)))(t)
	st = must(s.Stats(ctx(t)))(t)
	if u := st.ModelUsage["DATA_PROCESSING"]; u != (store.UsageTotals{Tasks: 2, ModelCalls: 2, PromptTokens: 300, OutputTokens: 40}) || u.CallsPerTask() != 1 {
		t.Fatalf("model usage: %+v", st.ModelUsage)
	}
	for _, state := range store.TaskStates {
		if _, ok := st.Tasks[string(state)]; !ok {
			t.Fatalf("stats miss task state %s", state)
		}
	}
	if st.Documents["NEW"] != 3 || st.Documents["INDEXED"] != 0 || st.Tasks["DONE"] != 1 || st.Tasks["QUALIFICATION_IN_PROGRESS"] != 1 {
		t.Fatalf("totals: %+v %+v", st.Documents, st.Tasks)
	}
	if st.DocumentsBySource["JIRA"]["NEW"] != 1 || st.DocumentsByClient["acme"]["NEW"] != 2 || st.TasksByKind["DATA_PROCESSING"]["DONE"] != 1 {
		t.Fatalf("breakdowns: %+v %+v %+v", st.DocumentsBySource, st.DocumentsByClient, st.TasksByKind)
	}
	if oldest := st.OldestWaiting["documents.NEW"]; oldest.IsZero() || time.Since(oldest) > time.Minute || len(st.OldestWaiting) != 1 {
		t.Fatalf("oldest waiting: %v", st.OldestWaiting)
	}
	// A quarantined document and a failed task count by their error class.
	d := must(s.ClaimDocuments(ctx(t), claimAt(time.Now(), "ix", 1)))(t)[0]
	bad := &store.ErrorInfo{Class: "bad_mime", Message: "no boundary"}
	if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: d.ID, From: store.DocIndexing, To: store.DocQuarantined, Owner: "ix", Error: bad}}); err != nil {
		t.Fatal(err)
	}
	running := must(s.ListTasks(ctx(t), store.TaskQuery{State: store.TaskQualifying}))(t)[0]
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: running.ID, From: store.TaskQualifying, To: store.TaskFailed, Owner: "q", Error: &store.ErrorInfo{Class: "bad_content"}}}); err != nil {
		t.Fatal(err)
	}
	st = must(s.Stats(ctx(t)))(t)
	if st.Failures["documents.bad_mime"] != 1 || st.Failures["tasks.bad_content"] != 1 || len(st.Failures) != 2 {
		t.Fatalf("failures: %v", st.Failures)
	}
}

func eventsOf(t *testing.T, s store.Store, id, typ string) []store.Event {
	var out []store.Event
	for _, e := range must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func testLinkPatterns(t *testing.T, s store.Store) {
	for _, p := range []store.LinkPattern{
		{Client: "acme", Kind: store.LinkAllow, Pattern: "Wiki.Acme.test"},
		{Client: "acme", Kind: store.LinkBlock, Pattern: "https://evil.test/"},
		{Client: "acme", Kind: store.LinkAllow, Pattern: "wiki.acme.test"}, // again
		{Client: "globex", Kind: store.LinkAllow, Pattern: "globex.test"},
	} {
		if err := s.AddLinkPattern(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	got := must(s.ListLinkPatterns(ctx(t), "acme"))(t)
	if len(got) != 2 || got[0].Kind != store.LinkAllow || got[0].Pattern != "wiki.acme.test" || got[1].Pattern != "https://evil.test/" {
		t.Fatalf("acme patterns: %+v", got)
	}
	if err := s.RemoveLinkPattern(ctx(t), "acme", store.LinkAllow, "WIKI.acme.test"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ListLinkPatterns(ctx(t), "acme"))(t); len(got) != 1 {
		t.Fatalf("after remove: %+v", got)
	}
	if got := must(s.ListLinkPatterns(ctx(t), "globex"))(t); len(got) != 1 {
		t.Fatalf("globex: %+v", got)
	}
	for _, bad := range []store.LinkPattern{{Client: "acme", Kind: "maybe", Pattern: "x"}, {Client: "acme", Kind: store.LinkAllow, Pattern: " "}, {Client: "Bad!", Kind: store.LinkAllow, Pattern: "x"}} {
		if err := s.AddLinkPattern(ctx(t), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func testModelCache(t *testing.T, s store.Store) {
	if _, err := s.GetModelAnswer(ctx(t), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	for _, v := range []string{`[{"name":"routeTask"}]`, `[]`} {
		if err := s.PutModelAnswer(ctx(t), "k", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got := must(s.GetModelAnswer(ctx(t), "k"))(t); string(got) != v {
			t.Fatalf("got %s, want %s", got, v)
		}
	}
}
