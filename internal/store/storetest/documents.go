package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// The documents role: versions, validation, claims and the state machine.

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

// testDocumentsPutTogether: PutDocuments stores each document as
// PutDocument would, in order — a version after the one before it in the
// same call, content already stored (before or earlier in the call) as a
// no-op — and a document it refuses costs the others nothing.
func testDocumentsPutTogether(t *testing.T, s store.Store) {
	before, _ := mustPut(t, s, doc("acme", "msg-0", "stored before"))
	docs := []store.Document{
		doc("acme", "msg-1", "first"),
		doc("acme", "msg-0", "stored before"),
		{Client: "acme", SourceType: store.SourceEmail, ExternalID: "no-content"},
		doc("acme", "msg-1", "first, edited"),
		doc("acme", "msg-1", "first"),
		doc("globex", "msg-1", "first"),
	}
	rs := must(s.PutDocuments(ctx(t), docs))(t)
	if len(rs) != len(docs) {
		t.Fatalf("%d results for %d documents", len(rs), len(docs))
	}
	for i, want := range []struct {
		created bool
		version int
	}{{true, 1}, {false, 1}, {false, 0}, {true, 2}, {false, 1}, {true, 1}} {
		r := rs[i]
		if i == 2 {
			if !errors.Is(r.Err, store.ErrInvalid) || !strings.Contains(r.Err.Error(), "raw") {
				t.Errorf("document %d: err = %v, want ErrInvalid naming raw", i, r.Err)
			}
			continue
		}
		if r.Err != nil || r.Created != want.created || r.Stored.Version != want.version || r.Stored.ID == "" {
			t.Errorf("document %d: %+v (err %v), want created=%v version %d", i, r.Stored, r.Err, want.created, want.version)
		}
	}
	if rs[1].Stored.ID != before.ID || rs[4].Stored.ID != rs[0].Stored.ID || rs[5].Stored.ID == rs[0].Stored.ID {
		t.Errorf("IDs: before %s, results %s %s %s %s", before.ID, rs[0].Stored.ID, rs[1].Stored.ID, rs[4].Stored.ID, rs[5].Stored.ID)
	}
	got := must(s.GetDocument(ctx(t), "acme", rs[3].Stored.ID))(t)
	if string(got.Raw) != "first, edited" || got.Normalized.Title != "subject msg-1" || got.State != store.DocNew {
		t.Fatalf("stored together, read back: %+v", got)
	}
	if stored := eventsOf(t, s, rs[0].Stored.ID, store.EventDocumentStored); len(stored) != 1 {
		t.Fatalf("document.stored events for %s = %d, want 1", rs[0].Stored.ID, len(stored))
	}
	if st := must(s.Stats(ctx(t)))(t); st.Documents[string(store.DocNew)] != 4 {
		t.Fatalf("NEW documents %d, want 4", st.Documents[string(store.DocNew)])
	}
	if rs := must(s.PutDocuments(ctx(t), nil))(t); len(rs) != 0 {
		t.Fatalf("nothing put: %+v", rs)
	}
}

// testDocumentsPutConcurrently: writers putting pages of the same items at
// once each get a version of their own for what they alone sent (numbered
// 1..n, none lost, none twice), and content they all sent is stored once.
func testDocumentsPutConcurrently(t *testing.T, s store.Store) {
	const writers, items = 4, 10
	mustPut(t, s, doc("acme", "item-0", "stored before")) // version 1 of item-0
	results := make([][]store.PutResult, writers)
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			page := []store.Document{doc("acme", "shared", "the same from every writer")}
			for i := range items {
				page = append(page, doc("acme", fmt.Sprint("item-", i), fmt.Sprintf("writer %d's item %d", w, i)))
			}
			page = append(page, doc("acme", "item-0", "stored before"))
			var err error
			results[w], err = s.PutDocuments(ctx(t), page)
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	created := 0
	for w, rs := range results {
		if len(rs) != items+2 {
			t.Fatalf("writer %d: %d results", w, len(rs))
		}
		for i, r := range rs {
			if r.Err != nil {
				t.Fatalf("writer %d, document %d: %v", w, i, r.Err)
			}
		}
		if rs[0].Created {
			created++
		}
		if rs[0].Stored.ID != results[0][0].Stored.ID || rs[items+1].Created || rs[items+1].Stored.Version != 1 {
			t.Errorf("writer %d: shared %+v, stored before %+v", w, rs[0], rs[items+1])
		}
	}
	if created != 1 {
		t.Errorf("the same content created by %d writers, want 1", created)
	}
	for i := range items {
		id := fmt.Sprint("item-", i)
		versions := must(s.ListDocumentVersions(ctx(t), "acme", store.SourceEmail, id))(t)
		want := writers
		if i == 0 {
			want++
		}
		var got []int
		contents := map[string]bool{}
		for _, v := range versions {
			got = append(got, v.Version)
			contents[string(v.Raw)] = true
			if n := len(eventsOf(t, s, v.ID, store.EventDocumentStored)); n != 1 {
				t.Errorf("%s version %d: %d document.stored events", id, v.Version, n)
			}
		}
		for w := range writers {
			if !contents[fmt.Sprintf("writer %d's item %d", w, i)] {
				t.Errorf("%s: writer %d's version lost", id, w)
			}
		}
		for v := range want {
			if !slices.Contains(got, v+1) {
				t.Errorf("%s: versions %v, want 1..%d", id, got, want)
				break
			}
		}
		if len(versions) != want {
			t.Errorf("%s: %d versions, want %d", id, len(versions), want)
		}
	}
}

// testGetDocuments reads several versions at once: the client's own, each
// once, as GetDocument reads them; another client's and unknown IDs left
// out.
func testGetDocuments(t *testing.T, s store.Store) {
	var ids []string
	for i := range 3 {
		d, _ := mustPut(t, s, doc("acme", fmt.Sprint("m-", i), fmt.Sprint("body ", i)))
		ids = append(ids, d.ID)
	}
	other, _ := mustPut(t, s, doc("globex", "m-9", "theirs"))
	got := must(s.GetDocuments(ctx(t), "acme", []string{ids[2], ids[0], other.ID, "no-such-document", ids[0]}))(t)
	if len(got) != 2 {
		t.Fatalf("%d documents, want 2", len(got))
	}
	slices.SortFunc(got, func(a, b store.Document) int { return strings.Compare(a.ID, b.ID) })
	want := []store.Document{must(s.GetDocument(ctx(t), "acme", ids[0]))(t), must(s.GetDocument(ctx(t), "acme", ids[2]))(t)}
	slices.SortFunc(want, func(a, b store.Document) int { return strings.Compare(a.ID, b.ID) })
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("GetDocuments %s:\n%+v\nGetDocument:\n%+v", want[i].ID, got[i], want[i])
		}
	}
	if got := must(s.GetDocuments(ctx(t), "acme", nil))(t); len(got) != 0 {
		t.Errorf("no IDs: %d documents", len(got))
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

// testDocumentPriority: a live document stored behind a bulk import is
// claimed first, keeps its priority, and the bulk follows oldest first.
func testDocumentPriority(t *testing.T, s store.Store) {
	now := time.Now()
	for i := range 3 {
		mustPut(t, s, doc("acme", fmt.Sprint("bulk", i), fmt.Sprint("body", i)))
	}
	live := doc("acme", "live", "fresh")
	live.Priority = store.PriorityLive
	mustPut(t, s, live)
	got := must(s.ClaimDocuments(ctx(t), claimAt(now, "A", 2)))(t)
	if len(got) != 2 || got[0].ExternalID != "live" || got[0].Priority != store.PriorityLive || got[1].ExternalID != "bulk0" || got[1].Priority != store.PriorityBulk {
		t.Fatalf("claimed %+v, want live then bulk0", got)
	}
	// A claim hands out each document's content with it.
	for i, body := range []string{"fresh", "body0"} {
		if d := got[i]; string(d.Raw) != body || d.Normalized.Body != body || d.Normalized.Title != "subject "+d.ExternalID ||
			len(d.Normalized.Links) != 1 || d.Normalized.Metadata["from"] != "ann@example.com" {
			t.Fatalf("claimed %s without its content: %q %+v", d.ExternalID, d.Raw, d.Normalized)
		}
	}
	if again := must(s.GetDocument(ctx(t), "acme", got[0].ID))(t); again.Priority != store.PriorityLive {
		t.Fatalf("stored priority %d", again.Priority)
	}
	// Handed back as bulk (a reprocess), it waits behind the older bulk.
	if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: got[0].ID, From: store.DocIndexing, To: store.DocNew, Owner: "A", Bulk: true}}); err != nil {
		t.Fatal(err)
	}
	urgent := claimAt(now, "B", 3)
	urgent.Urgent = true
	if got := must(s.ClaimDocuments(ctx(t), urgent))(t); len(got) != 0 {
		t.Fatalf("an urgent claim took bulk documents: %+v", got)
	}
	rest := must(s.ClaimDocuments(ctx(t), claimAt(now, "B", 3)))(t)
	if len(rest) != 3 || rest[2].ExternalID != "live" || rest[2].Priority != store.PriorityBulk {
		t.Fatalf("after the demotion claimed %+v, want bulk1, bulk2, live", rest)
	}
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
