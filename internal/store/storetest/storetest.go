// Package storetest is the conformance suite every store backend must pass.
//
// A backend's tests call Exercise with a constructor that returns a fresh,
// empty store for each call (a new file, database or collection prefix named
// from t.Name()) and cleans it up with t.Cleanup.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	t.Run("DocumentsPutTogether", func(t *testing.T) { t.Parallel(); testDocumentsPutTogether(t, newStore(t)) })
	t.Run("DocumentsPutConcurrently", func(t *testing.T) { t.Parallel(); testDocumentsPutConcurrently(t, newStore(t)) })
	t.Run("DocumentsValidation", func(t *testing.T) { t.Parallel(); testDocumentValidation(t, newStore(t)) })
	t.Run("DocumentsGetMany", func(t *testing.T) { t.Parallel(); testGetDocuments(t, newStore(t)) })
	t.Run("DocumentsClaimAndRescue", func(t *testing.T) { t.Parallel(); testDocumentClaim(t, newStore(t)) })
	t.Run("DocumentsClaimLiveFirst", func(t *testing.T) { t.Parallel(); testDocumentPriority(t, newStore(t)) })
	t.Run("TasksDemotedToBulk", func(t *testing.T) { t.Parallel(); testTaskDemotion(t, newStore(t)) })
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
	t.Run("TaskMemories", func(t *testing.T) { t.Parallel(); testTaskMemories(t, newStore(t)) })
	t.Run("Events", func(t *testing.T) { t.Parallel(); testEvents(t, newStore(t)) })
	t.Run("Aliases", func(t *testing.T) { t.Parallel(); testAliases(t, newStore(t)) })
	t.Run("Identities", func(t *testing.T) { t.Parallel(); testIdentities(t, newStore(t)) })
	t.Run("IdentityFactSets", func(t *testing.T) { t.Parallel(); testIdentityFactSets(t, newStore(t)) })
	t.Run("Cursors", func(t *testing.T) { t.Parallel(); testCursors(t, newStore(t)) })
	t.Run("ClientsAndKeys", func(t *testing.T) { t.Parallel(); testClients(t, newStore(t)) })
	t.Run("Stats", func(t *testing.T) { t.Parallel(); testStats(t, newStore(t)) })
	t.Run("LinkPatterns", func(t *testing.T) { t.Parallel(); testLinkPatterns(t, newStore(t)) })
	t.Run("ModelCache", func(t *testing.T) { t.Parallel(); testModelCache(t, newStore(t)) })
	t.Run("Encoders", func(t *testing.T) { t.Parallel(); testEncoders(t, newStore(t)) })
	t.Run("ListingPages", func(t *testing.T) { t.Parallel(); testListingPages(t, newStore(t)) })
	t.Run("DegradedDocuments", func(t *testing.T) { t.Parallel(); testDegradedDocuments(t, newStore(t)) })
	t.Run("FailuresListed", func(t *testing.T) { t.Parallel(); testFailuresListed(t, newStore(t)) })
	t.Run("ClientNamespaces", func(t *testing.T) { t.Parallel(); testClientNamespaces(t, newStore(t)) })
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

// testFailuresListed lists a client's failed tasks and quarantined
// documents among others' and among the client's in other states, a page
// at a time: each once, newest first, the client's only.
func testFailuresListed(t *testing.T, s store.Store) {
	var failed, quarantined []string
	for i := range 12 {
		for _, client := range []string{"acme", "globex"} {
			d, _ := mustPut(t, s, doc(client, fmt.Sprint("f-", i), fmt.Sprint("body ", i)))
			must(s.EnqueueTasks(ctx(t), task(client, d.ID)))(t)
		}
	}
	for _, d := range must(s.ClaimDocuments(ctx(t), claimAt(time.Now(), "ix", 24)))(t) {
		to := store.DocIndexed
		var bad *store.ErrorInfo
		if d.ExternalID < "f-3" { // f-0, f-1, f-10, f-11, f-2 of each client
			to, bad = store.DocQuarantined, &store.ErrorInfo{Class: "bad_mime", Message: "no boundary"}
		}
		if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: d.ID, From: store.DocIndexing, To: to, Owner: "ix", Error: bad}}); err != nil {
			t.Fatal(err)
		}
		if to == store.DocQuarantined && d.Client == "acme" {
			quarantined = append(quarantined, d.ID)
		}
	}
	for _, tk := range must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), "q", 24)))(t) {
		to := store.TaskDone
		var bad *store.ErrorInfo
		if len(failed) < 7 || tk.Client == "globex" {
			to, bad = store.TaskFailed, &store.ErrorInfo{Class: "bad_content"}
		}
		if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: tk.ID, From: store.TaskQualifying, To: to, Owner: "q", Error: bad}}); err != nil {
			t.Fatal(err)
		}
		if to == store.TaskFailed && tk.Client == "acme" {
			failed = append(failed, tk.ID)
		}
	}
	tasks := allPages(t, func(after *store.Position) ([]store.Task, error) {
		return s.ListTasks(ctx(t), store.TaskQuery{Client: "acme", State: store.TaskFailed, Limit: 3, After: after})
	}, func(x store.Task) store.Position { return store.Position{UpdatedAt: x.UpdatedAt, ID: x.ID} })
	if got, want := slices.Sorted(slices.Values(ids(tasks))), slices.Sorted(slices.Values(failed)); !slices.Equal(got, want) {
		t.Fatalf("failed tasks listed %v, want %v", got, want)
	}
	docs := allPages(t, func(after *store.Position) ([]store.Document, error) {
		return s.ListDocuments(ctx(t), store.DocumentQuery{Client: "acme", State: store.DocQuarantined, Limit: 2, After: after})
	}, func(x store.Document) store.Position { return store.Position{UpdatedAt: x.UpdatedAt, ID: x.ID} })
	if got, want := slices.Sorted(slices.Values(ids(docs))), slices.Sorted(slices.Values(quarantined)); !slices.Equal(got, want) {
		t.Fatalf("quarantined documents listed %v, want %v", got, want)
	}
	for _, d := range docs {
		if d.Error == nil || d.Error.Class != "bad_mime" {
			t.Fatalf("quarantined document %s without its reason: %+v", d.ID, d.Error)
		}
	}
}

// allPages reads a listing a page at a time, each after the last item of
// the one before, until a page is empty; the items must come newest first
// (updated_at descending, then ID ascending), which it checks.
func allPages[T any](t *testing.T, page func(after *store.Position) ([]T, error), at func(T) store.Position) []T {
	t.Helper()
	var out []T
	var after *store.Position
	for {
		got := must(page(after))(t)
		if len(got) == 0 {
			return out
		}
		for _, x := range got {
			p := at(x)
			if after != nil && (p.UpdatedAt.After(after.UpdatedAt) || p.UpdatedAt.Equal(after.UpdatedAt) && p.ID <= after.ID) {
				t.Fatalf("item %d (%s at %v) out of order after %s at %v", len(out), p.ID, p.UpdatedAt, after.ID, after.UpdatedAt)
			}
			out, after = append(out, x), &p
		}
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

func eventsOf(t *testing.T, s store.Store, id, typ string) []store.Event {
	var out []store.Event
	for _, e := range must(s.ListEvents(ctx(t), store.EventQuery{AggregateID: id}))(t) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}
