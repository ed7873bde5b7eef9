// Package ragtest is the conformance suite every chunk backend passes.
// Backends call Exercise with a constructor returning a fresh, empty store
// per call, cleaned up with t.Cleanup.
package ragtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb/rag"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) rag.Store

// Caps are what a backend's keyword search does beyond splitting words and
// lower-casing them; the suite expects what is declared.
type Caps struct {
	Stemming     bool // "review" finds "reviews"
	FoldsAccents bool // "crepes" finds "crêpes"
}

// Exercise runs the suite for a backend that stems and folds accents.
func Exercise(t *testing.T, newStore NewStore) {
	ExerciseCaps(t, newStore, Caps{Stemming: true, FoldsAccents: true})
}

// ExerciseCaps runs the suite for a backend with caps.
func ExerciseCaps(t *testing.T, newStore NewStore, caps Caps) {
	testBM25 := func(t *testing.T, s rag.Store) { testBM25(t, s, caps) }
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s rag.Store)
	}{
		{"RoundTripAndReplace", testRoundTrip},
		{"Deletes", testDeletes},
		{"SourcesChunkIDs", testSourcesChunkIDs},
		{"BM25", testBM25},
		{"TitleField", testTitle},
		{"NearVector", testNearVector},
		{"Hybrid", testHybrid},
		{"Filters", testFilters},
		{"ClientIsolation", testIsolation},
		{"Validation", testValidation},
		{"Texts", testTexts},
		{"NothingWrittenYet", testEmpty},
		{"DocFreqs", testDocFreqs},
		{"SampleVectors", testSampleVectors},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// corpus: four chunks over two sources with 4-d vectors pointing at
// distinct "topics" (axis 0 = databases, 1 = deploys, 2 = food, 3 = travel).
func corpus() []rag.Chunk {
	return []rag.Chunk{
		{ID: "c-db", Text: "The database migration failed: the orders table index is corrupt.", GraphRefs: []string{"jira:ops-1", "person:ann"},
			SourceURN: "jira:OPS-1", SourceType: "JIRA", Kind: "issue", NodeKey: "jira:ops-1", Timestamp: t0, Vector: []float32{1, 0.1, 0, 0}},
		{ID: "c-deploy", Text: "Deploy of release 2.3 to production is scheduled for Friday; database changes included.", GraphRefs: []string{"release:2.3"},
			SourceURN: "email:42", SourceType: "EMAIL", Kind: "body", NodeKey: "email:42", Timestamp: t0.Add(24 * time.Hour), Vector: []float32{0.3, 1, 0, 0}},
		{ID: "c-food", Text: "Team lunch at the café on Thursday: crêpes and coffee.", GraphRefs: []string{"event:lunch"},
			SourceURN: "email:43", SourceType: "EMAIL", Kind: "body", NodeKey: "email:43", Timestamp: t0.Add(48 * time.Hour), Vector: []float32{0, 0, 1, 0.2}},
		{ID: "c-travel", Text: "Flights to Lisbon booked for the offsite; reviews of hotels attached.", GraphRefs: []string{"person:bob"},
			SourceURN: "email:43", SourceType: "EMAIL", Kind: "attachment", NodeKey: "email:43", Timestamp: t0.Add(72 * time.Hour), Vector: []float32{0, 0, 0.2, 1}},
	}
}

func load(t *testing.T, s rag.Store, client string) rag.Index {
	t.Helper()
	x := s.For(client)
	if err := x.Upsert(t.Context(), corpus()...); err != nil {
		t.Fatal(err)
	}
	return x
}

func ids(hits []rag.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Chunk.ID
	}
	return out
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testRoundTrip(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	got, err := x.Get(ctx, "c-travel", "nope", "c-db")
	check(t, err)
	if len(got) != 2 || got[0].ID != "c-travel" || got[1].ID != "c-db" {
		t.Fatalf("get order: %v", got)
	}
	db := got[1]
	want := corpus()[0]
	if db.Text != want.Text || !slices.Equal(db.GraphRefs, want.GraphRefs) || db.SourceURN != want.SourceURN || db.SourceType != "JIRA" ||
		db.Kind != "issue" || db.NodeKey != "jira:ops-1" || !db.Timestamp.Equal(t0) || len(db.Vector) != 4 {
		t.Fatalf("round trip: %+v", db)
	}
	// Vectors come back unit length (cosine similarity is a dot product).
	var norm float64
	for _, v := range db.Vector {
		norm += float64(v) * float64(v)
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Fatalf("vector norm² %v", norm)
	}
	// Upserting again is a no-op; a changed text replaces the old one in BM25.
	check(t, x.Upsert(ctx, corpus()...))
	if n, _ := x.Count(ctx); n != 4 {
		t.Fatalf("count after re-upsert: %d", n)
	}
	changed := corpus()[2]
	changed.Text = "Team dinner at the bistro on Thursday."
	check(t, x.Upsert(ctx, changed))
	if hits, _ := x.BM25(ctx, rag.Query{Text: "crêpes"}); len(hits) != 0 {
		t.Fatalf("old text still matches: %v", ids(hits))
	}
	if hits, _ := x.BM25(ctx, rag.Query{Text: "bistro"}); !slices.Equal(ids(hits), []string{"c-food"}) {
		t.Fatalf("new text: %v", ids(hits))
	}
	if n, _ := x.Count(ctx); n != 4 {
		t.Fatalf("count after replace: %d", n)
	}
}

func testDeletes(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	src, err := x.SourceChunkIDs(ctx, "email:43")
	check(t, err)
	if !slices.Equal(src, []string{"c-food", "c-travel"}) {
		t.Fatalf("source chunks: %v", src)
	}
	// The source's chunks with their texts, as Get has them (the backend's
	// cheaper read, when it has one).
	full, err := x.Get(ctx, src...)
	check(t, err)
	texts, err := rag.SourceChunks(ctx, x, "email:43")
	check(t, err)
	if len(texts) != len(full) {
		t.Fatalf("source chunks: %d, Get: %d", len(texts), len(full))
	}
	for i, c := range texts {
		f := full[i]
		if c.ID != f.ID || c.Text != f.Text || c.Title != f.Title || c.Kind != f.Kind || c.SourceURN != f.SourceURN || c.SourceURN != "email:43" || c.Text == "" {
			t.Fatalf("source chunk %d: %+v, Get has %+v", i, c, f)
		}
	}
	if none, err := rag.SourceChunks(ctx, x, "email:nope"); err != nil || len(none) != 0 {
		t.Fatalf("no such source: %v %v", none, err)
	}
	n, err := x.DeleteBySource(ctx, "email:43")
	check(t, err)
	if n != 2 {
		t.Fatalf("deleted %d by source", n)
	}
	if hits, _ := x.BM25(ctx, rag.Query{Text: "lisbon"}); len(hits) != 0 {
		t.Fatalf("deleted chunk still found by BM25")
	}
	if hits, _ := x.NearVector(ctx, rag.Query{Vector: []float32{0, 0, 0, 1}, Limit: 10}); slices.Contains(ids(hits), "c-travel") {
		t.Fatalf("deleted chunk still found by vector: %v", ids(hits))
	}
	n, err = x.DeleteByNode(ctx, "jira:ops-1")
	check(t, err)
	if n != 1 {
		t.Fatalf("deleted %d by node", n)
	}
	n, err = x.Delete(ctx, "c-deploy", "missing")
	check(t, err)
	if n != 1 {
		t.Fatalf("deleted %d by id", n)
	}
	if c, _ := x.Count(ctx); c != 0 {
		t.Fatalf("left %d", c)
	}
	if n, err := x.Delete(ctx); err != nil || n != 0 {
		t.Fatalf("delete nothing: %d %v", n, err)
	}
}

func testBM25(t *testing.T, s rag.Store, caps Caps) {
	x := load(t, s, "acme")
	ctx := t.Context()
	type bm25Case struct {
		query string
		want  []string
	}
	cases := []bm25Case{
		{"database", []string{"c-db", "c-deploy"}}, // the shorter chunk first
		{"orders index corrupt", []string{"c-db"}},
		{"crêpes", []string{"c-food"}},
		{"the of and", nil}, // only stop words
		{"", nil},
		{"kubernetes", nil},
	}
	if caps.FoldsAccents {
		cases = append(cases, bm25Case{"cafe creperie crepes", []string{"c-food"}})
	}
	if caps.Stemming {
		cases = append(cases, bm25Case{"review", []string{"c-travel"}})
	}
	for _, tc := range cases {
		hits, err := x.BM25(ctx, rag.Query{Text: tc.query})
		check(t, err)
		if got := ids(hits); !slices.Equal(got, tc.want) {
			t.Errorf("BM25(%q) = %v, want %v", tc.query, got, tc.want)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score || hits[i].BM25Score <= 0 {
				t.Errorf("BM25(%q) scores not descending/positive: %v", tc.query, hits)
			}
		}
	}
	hits, err := x.BM25(ctx, rag.Query{Text: "database", Limit: 1})
	check(t, err)
	if len(hits) != 1 {
		t.Fatalf("limit 1: %d", len(hits))
	}
}

// A chunk's title (its item's) is stored, searched and weighs more than
// its text: of two chunks holding a word once, the one whose title holds it
// ranks first; a title alone makes a chunk match.
func testTitle(t *testing.T, s rag.Store) {
	ctx := t.Context()
	x := s.For("acme")
	mk := func(id, title, text string) rag.Chunk {
		return rag.Chunk{ID: id, Title: title, Text: text, SourceURN: "jira:" + id, SourceType: "JIRA", Kind: "body", NodeKey: "jira:" + id,
			Timestamp: t0, Vector: []float32{1, 0, 0, 0}}
	}
	check(t, x.Upsert(ctx,
		mk("in-text", "Release checklist", "The keystore password rotation is due next week."),
		mk("in-title", "Keystore password rotation", "Due next week, see the checklist for the release."),
		mk("title-only", "Gradle daemon crash", "See the attached log."),
	))
	hits, err := x.BM25(ctx, rag.Query{Text: "keystore"})
	check(t, err)
	if got := ids(hits); !slices.Equal(got, []string{"in-title", "in-text"}) {
		t.Fatalf("BM25(keystore) = %v, want the title match first", got)
	}
	if hits[0].Chunk.Title != "Keystore password rotation" || hits[0].Chunk.Text != "Due next week, see the checklist for the release." {
		t.Fatalf("hit %+v", hits[0].Chunk)
	}
	if hits, _ := x.BM25(ctx, rag.Query{Text: "gradle"}); !slices.Equal(ids(hits), []string{"title-only"}) {
		t.Fatalf("BM25(gradle) = %v", ids(hits))
	}
	// Hits without their texts keep their titles, searched by words or
	// by vector; a title changed by a later write is the new one.
	check(t, x.Upsert(ctx, mk("in-text", "Release checklist (2.1)", "The keystore password rotation is due next week.")))
	for _, search := range []func(context.Context, rag.Query) ([]rag.Hit, error){x.BM25, x.Hybrid} {
		q := rag.Query{Text: "keystore", Vector: []float32{1, 0, 0, 0}, Alpha: 0.5, NoText: true}
		hits, err := search(ctx, q)
		check(t, err)
		titles := map[string]string{}
		for _, h := range hits {
			titles[h.Chunk.ID] = h.Chunk.Title
		}
		if titles["in-title"] != "Keystore password rotation" || titles["in-text"] != "Release checklist (2.1)" {
			t.Fatalf("search without texts: titles %v", titles)
		}
	}
	got, err := x.Get(ctx, "title-only")
	check(t, err)
	if len(got) != 1 || got[0].Title != "Gradle daemon crash" {
		t.Fatalf("get: %+v", got)
	}
}

func testNearVector(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	hits, err := x.NearVector(ctx, rag.Query{Vector: []float32{0.9, 0.5, 0, 0}, Limit: 2})
	check(t, err)
	if !slices.Equal(ids(hits), []string{"c-db", "c-deploy"}) || hits[0].Chunk.Text == "" || hits[0].VectorScore <= hits[1].VectorScore {
		t.Fatalf("near vector: %+v", hits)
	}
	// Magnitude does not matter: cosine.
	big, err := x.NearVector(ctx, rag.Query{Vector: []float32{90, 50, 0, 0}, Limit: 2})
	check(t, err)
	if !slices.Equal(ids(big), ids(hits)) || math.Abs(big[0].VectorScore-hits[0].VectorScore) > 1e-5 {
		t.Fatalf("scaled query: %+v", big)
	}
	if _, err := x.NearVector(ctx, rag.Query{Vector: []float32{1, 2, 3}}); !errors.Is(err, rag.ErrInvalid) {
		t.Fatalf("wrong dimension: %v", err)
	}
	// A chunk of another dimension (another embedder's) is refused as
	// invalid, and the index answers as before.
	if err := x.Upsert(ctx, rag.Chunk{ID: "c-odd", Text: "another model's vector", SourceURN: "urn:odd", Vector: []float32{1, 2, 3}}); !errors.Is(err, rag.ErrInvalid) {
		t.Fatalf("a chunk of another dimension: %v", err)
	}
	again, err := x.NearVector(ctx, rag.Query{Vector: []float32{0.9, 0.5, 0, 0}, Limit: 2})
	check(t, err)
	if !slices.Equal(ids(again), ids(hits)) {
		t.Fatalf("after a refused chunk: %+v", again)
	}
}

func testHybrid(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	// The text says "database" (c-db, c-deploy); the vector points at travel.
	q := rag.Query{Text: "database", Vector: []float32{0, 0.05, 0.1, 1}, Limit: 4} // no two chunks tie on the vector side
	q.Alpha = 0
	kw, err := x.Hybrid(ctx, q)
	check(t, err)
	if !slices.Equal(ids(kw), []string{"c-db", "c-deploy"}) {
		t.Fatalf("alpha 0 (BM25 only): %v", ids(kw))
	}
	q.Alpha = 1
	vec, err := x.Hybrid(ctx, q)
	check(t, err)
	if len(vec) == 0 || vec[0].Chunk.ID != "c-travel" {
		t.Fatalf("alpha 1 (vector only): %v", ids(vec))
	}
	// relativeScore at 0.5: c-db is top of BM25 (1.0·0.5) and bottom of the
	// vector list; c-travel is top of vector (1.0·0.5) and absent from BM25.
	q.Alpha = 0.5
	mixed, err := x.Hybrid(ctx, q)
	check(t, err)
	top := ids(mixed)[:2]
	slices.Sort(top)
	if !slices.Equal(top, []string{"c-db", "c-travel"}) || math.Abs(mixed[0].Score-0.5) > 1e-9 {
		t.Fatalf("alpha 0.5 relativeScore: %v scores %v", ids(mixed), mixed)
	}
	for _, h := range mixed {
		if h.Score < 0 || h.Score > 1 {
			t.Fatalf("relativeScore out of 0..1: %v", h)
		}
	}
	q.Fusion = rag.Ranked
	ranked, err := x.Hybrid(ctx, q)
	check(t, err)
	// RRF as Weaviate computes it (weight/(60+rank), rank from 0): both
	// lists' first places score 0.5/60; c-db is also ranked in the vector
	// list, so it wins. (Scores to 1e-6: Weaviate's are float32.)
	if ranked[0].Chunk.ID != "c-db" || math.Abs(ranked[0].Score-(0.5/60+0.5/(60+float64(rankIn(vec, "c-db")-1)))) > 1e-6 {
		t.Fatalf("ranked fusion: %v %v", ids(ranked), ranked[0].Score)
	}
}

func rankIn(hits []rag.Hit, id string) int {
	for i, h := range hits {
		if h.Chunk.ID == id {
			return i + 1
		}
	}
	return 1 << 30
}

func testFilters(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		f    rag.Filter
		want []string // sorted
	}{
		{"source type", rag.Filter{SourceTypes: []string{"JIRA"}}, []string{"c-db"}},
		{"kind", rag.Filter{Kinds: []string{"attachment", "issue"}}, []string{"c-db", "c-travel"}},
		{"node type", rag.Filter{NodeTypes: []string{"person"}}, []string{"c-db", "c-travel"}},
		{"source", rag.Filter{SourceURN: "email:43"}, []string{"c-food", "c-travel"}},
		{"since", rag.Filter{Since: t0.Add(48 * time.Hour)}, []string{"c-food", "c-travel"}},
		{"until", rag.Filter{Until: t0.Add(24 * time.Hour)}, []string{"c-db"}},
		{"combined", rag.Filter{SourceTypes: []string{"EMAIL"}, Until: t0.Add(60 * time.Hour)}, []string{"c-deploy", "c-food"}},
	} {
		text := "database deploy lunch flights orders crêpes lisbon release"
		for _, mode := range []string{"bm25", "vector", "hybrid"} {
			q := rag.Query{Text: text, Vector: []float32{1, 1, 1, 1}, Limit: 10, Alpha: 0.5, Filter: tc.f}
			var hits []rag.Hit
			var err error
			switch mode {
			case "bm25":
				hits, err = x.BM25(ctx, q)
			case "vector":
				hits, err = x.NearVector(ctx, q)
			default:
				hits, err = x.Hybrid(ctx, q)
			}
			check(t, err)
			got := ids(hits)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: %v, want %v", tc.name, mode, got, tc.want)
			}
		}
	}
}

func testIsolation(t *testing.T, s rag.Store) {
	ctx := t.Context()
	a := load(t, s, "acme")
	b := s.For("globex")
	if got, _ := b.Get(ctx, "c-db"); len(got) != 0 {
		t.Fatal("globex gets acme's chunk")
	}
	for name, search := range map[string]func(rag.Query) ([]rag.Hit, error){
		"bm25": func(q rag.Query) ([]rag.Hit, error) { return b.BM25(ctx, q) }, "vector": func(q rag.Query) ([]rag.Hit, error) { return b.NearVector(ctx, q) },
		"hybrid": func(q rag.Query) ([]rag.Hit, error) { return b.Hybrid(ctx, q) },
	} {
		hits, err := search(rag.Query{Text: "database", Vector: []float32{1, 0, 0, 0}, Alpha: 0.5})
		check(t, err)
		if len(hits) != 0 {
			t.Errorf("globex %s search sees acme: %v", name, ids(hits))
		}
	}
	if n, _ := b.Count(ctx); n != 0 {
		t.Fatalf("globex count %d", n)
	}
	if n, _ := b.DeleteBySource(ctx, "jira:OPS-1"); n != 0 {
		t.Fatalf("globex deleted %d of acme's chunks", n)
	}
	// Same chunk ID in another client is a different chunk.
	other := corpus()[0]
	other.Text = "globex's own text about database backups"
	check(t, b.Upsert(ctx, other))
	ga, _ := a.Get(ctx, "c-db")
	gb, _ := b.Get(ctx, "c-db")
	if ga[0].Text == gb[0].Text {
		t.Fatal("clients share a chunk")
	}
	if n, _ := a.Count(ctx); n != 4 {
		t.Fatalf("acme count %d", n)
	}
	if _, err := s.For("Bad Client!").Count(ctx); !errors.Is(err, rag.ErrInvalid) {
		t.Fatalf("invalid client: %v", err)
	}
	// Dropping globex's chunks leaves acme's, and globex searches find nothing.
	check(t, b.Drop(ctx))
	if n, _ := b.Count(ctx); n != 0 {
		t.Fatalf("globex count after drop %d", n)
	}
	if hits, err := b.BM25(ctx, rag.Query{Text: "database backups"}); err != nil || len(hits) != 0 {
		t.Fatalf("globex finds %v after drop (%v)", ids(hits), err)
	}
	if n, _ := a.Count(ctx); n != 4 {
		t.Fatalf("acme count %d after globex's drop", n)
	}
	if hits, _ := a.BM25(ctx, rag.Query{Text: "database"}); len(hits) == 0 {
		t.Fatal("acme's search lost its chunks to globex's drop")
	}
}

func testValidation(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	good := corpus()[0]
	for name, mutate := range map[string]func(*rag.Chunk){
		"no id":       func(c *rag.Chunk) { c.ID = "" },
		"blank text":  func(c *rag.Chunk) { c.Text = " \n\t" },
		"no source":   func(c *rag.Chunk) { c.SourceURN = "" },
		"no vector":   func(c *rag.Chunk) { c.Vector = nil },
		"wrong dims":  func(c *rag.Chunk) { c.ID = "other"; c.Vector = []float32{1, 2} },
		"mixed batch": func(c *rag.Chunk) { c.Vector = append(c.Vector, 9) },
	} {
		c := good
		mutate(&c)
		batch := []rag.Chunk{c}
		if name == "mixed batch" || name == "wrong dims" {
			batch = []rag.Chunk{good, c}
		}
		if err := x.Upsert(ctx, batch...); !errors.Is(err, rag.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for name, q := range map[string]rag.Query{
		"alpha":  {Text: "x", Alpha: 1.5},
		"fusion": {Text: "x", Fusion: "max"},
		"limit":  {Text: "x", Limit: rag.MaxLimit + 1},
	} {
		if _, err := x.Hybrid(ctx, q); !errors.Is(err, rag.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// rag.Texts (the index's own TextGetter when it has one) returns the IDs,
// texts and titles Get returns, of existing chunks of the index's client
// only.
func testTexts(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	other := s.For("globex")
	check(t, other.Upsert(ctx, rag.Chunk{ID: "g-1", Text: "Globex secret", SourceURN: "urn:g", Vector: []float32{1, 0, 0, 0}}))
	check(t, x.Upsert(ctx, rag.Chunk{ID: "c-titled", Title: "Orders index corrupt", Text: "Rebuilt the index.", SourceURN: "jira:OPS-2", Vector: []float32{1, 0, 0, 0}}))
	got, err := rag.Texts(ctx, x, "c-db", "nope", "c-food", "g-1", "c-titled")
	check(t, err)
	if len(got) != 3 {
		t.Fatalf("texts: %d chunks (%v), want c-db, c-food and c-titled", len(got), slices.Collect(maps.Keys(got)))
	}
	full, err := x.Get(ctx, "c-db", "c-food", "c-titled")
	check(t, err)
	for _, want := range full {
		c, ok := got[want.ID]
		if !ok || c.ID != want.ID || c.Text != want.Text || c.Title != want.Title {
			t.Errorf("texts: %s = %+v, want ID, text and title %q, %q, %q", want.ID, c, want.ID, want.Text, want.Title)
		}
	}
	if got["c-titled"].Title != "Orders index corrupt" {
		t.Errorf("texts: c-titled's title %q", got["c-titled"].Title)
	}
}

// Several sources' chunk IDs are read at once: each source's sorted, a
// source named twice once, a source without chunks (or another client's)
// absent.
func testSourcesChunkIDs(t *testing.T, s rag.Store) {
	x := load(t, s, "acme")
	ctx := t.Context()
	check(t, s.For("globex").Upsert(ctx, rag.Chunk{ID: "g-1", Text: "Globex mail", SourceURN: "email:44", Vector: []float32{1, 0, 0, 0}}))
	got, err := x.SourcesChunkIDs(ctx, []string{"email:43", "jira:OPS-1", "urn:none", "email:43", "email:44"})
	check(t, err)
	want := map[string][]string{"email:43": {"c-food", "c-travel"}, "jira:OPS-1": {"c-db"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sources' chunks: %v, want %v", got, want)
	}
	if got, err := x.SourcesChunkIDs(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("no sources: %v %v", got, err)
	}
	if got, err := s.For("initech").SourcesChunkIDs(ctx, []string{"email:43"}); err != nil || len(got) != 0 {
		t.Fatalf("a client that never wrote: %v %v", got, err)
	}
}

// A client that never wrote (on a store nothing was written to) reads as
// empty, without errors.
func testEmpty(t *testing.T, s rag.Store) {
	ctx := t.Context()
	x := s.For("acme")
	got, err := x.Get(ctx, "c-db")
	check(t, err)
	src, err := x.SourceChunkIDs(ctx, "email:43")
	check(t, err)
	if len(got)+len(src) != 0 {
		t.Fatalf("get %v, source chunks %v", got, src)
	}
	q := rag.Query{Text: "database", Vector: []float32{1, 0, 0, 0}, Alpha: 0.5}
	for name, search := range map[string]func(context.Context, rag.Query) ([]rag.Hit, error){"bm25": x.BM25, "vector": x.NearVector, "hybrid": x.Hybrid} {
		if hits, err := search(ctx, q); err != nil || len(hits) != 0 {
			t.Fatalf("%s: %v %v", name, hits, err)
		}
	}
	if n, err := x.Count(ctx); err != nil || n != 0 {
		t.Fatalf("count %d %v", n, err)
	}
	if n, err := x.DeleteBySource(ctx, "email:43"); err != nil || n != 0 {
		t.Fatalf("delete %d %v", n, err)
	}
	check(t, x.Drop(ctx))
}

// testDocFreqs: a backend counts how many of a client's chunks hold a word
// (rag.TermCounter, which search feedback and similar items weigh words
// by), this client's chunks only, with the total.
func testDocFreqs(t *testing.T, s rag.Store) {
	ctx := t.Context()
	x := load(t, s, "acme")
	other := s.For("globex")
	check(t, other.Upsert(ctx, rag.Chunk{ID: "g", Text: "database database", SourceURN: "g:1", Vector: []float32{1, 0, 0, 0}}))
	tc, ok := x.(rag.TermCounter)
	if !ok {
		t.Fatalf("%T does not count words (rag.TermCounter)", x)
	}
	counts, total, err := tc.DocFreqs(ctx, []string{"database", "lunch", "zeppelin"})
	check(t, err)
	if want := []int{2, 1, 0}; !slices.Equal(counts, want) || total != len(corpus()) {
		t.Fatalf("counts %v of %d chunks, want %v of %d", counts, total, want, len(corpus()))
	}
	// A stop word (callers leave them out) costs none of the others.
	if counts, _, err := tc.DocFreqs(ctx, []string{"the", "database"}); err != nil || counts[1] != 2 {
		t.Fatalf("with a stop word: %v, %v", counts, err)
	}
	if counts, total, err := s.For("initech").(rag.TermCounter).DocFreqs(ctx, []string{"database"}); err != nil || total != 0 || counts[0] != 0 {
		t.Fatalf("a client with no chunks: %v of %d, %v", counts, total, err)
	}
}

// testSampleVectors: a backend hands out a sample of a client's vectors
// (rag.VectorSampler, which search estimates the client's common
// directions from): this client's only, as written (within 1e-3 after
// quantizing), at most n, the same ones in the same order whatever order
// the chunks were written in, and all of them when n is at least their
// count.
func testSampleVectors(t *testing.T, s rag.Store) {
	ctx := t.Context()
	const n = 40
	var written [][]float32 // unit length, as sampled
	var chunks []rag.Chunk
	for i := range n {
		v := []float32{float32(i) + 1, float32(i%7) - 3, 0.5, float32(n - i)}
		c := rag.Chunk{ID: fmt.Sprintf("s-%02d", i), Text: fmt.Sprintf("chunk %d", i), SourceURN: fmt.Sprintf("doc:%d", i), Vector: v}
		chunks = append(chunks, c)
		written = append(written, rag.Normalize(v))
	}
	one := s.For("acme")
	check(t, one.Upsert(ctx, chunks...))
	check(t, s.For("initech").Upsert(ctx, rag.Chunk{ID: "x", Text: "other", SourceURN: "x:1", Vector: []float32{0, 0, 0, 1}}))
	sampler, ok := one.(rag.VectorSampler)
	if !ok {
		t.Fatalf("%T cannot sample its vectors (rag.VectorSampler)", one)
	}
	if count, err := sampler.VectorCount(ctx); err != nil || count != n {
		t.Fatalf("VectorCount = %d, %v; want %d", count, err, n)
	}
	all, err := sampler.SampleVectors(ctx, 100)
	check(t, err)
	if len(all) != n {
		t.Fatalf("a sample of 100 of %d vectors holds %d", n, len(all))
	}
	seen := map[int]bool{}
	for _, v := range all {
		k := nearest(rag.Normalize(v), written)
		if k < 0 || seen[k] {
			t.Fatalf("sampled %v: not one of the client's vectors, or twice", v)
		}
		seen[k] = true
	}
	some, err := sampler.SampleVectors(ctx, 10)
	check(t, err)
	// The same chunks written again, one at a time, last first.
	check(t, one.Drop(ctx))
	for i := len(chunks) - 1; i >= 0; i-- {
		check(t, one.Upsert(ctx, chunks[i]))
	}
	other, err := sampler.SampleVectors(ctx, 10)
	check(t, err)
	if len(some) != 10 || len(other) != 10 {
		t.Fatalf("samples of 10: %d and %d vectors", len(some), len(other))
	}
	for i := range some {
		if nearest(rag.Normalize(some[i]), written) != nearest(rag.Normalize(other[i]), written) {
			t.Fatalf("the same chunks written in another order sample differently: %v against %v", some, other)
		}
	}
	if none, err := s.For("umbrella").(rag.VectorSampler).SampleVectors(ctx, 10); err != nil || len(none) != 0 {
		t.Fatalf("a client with no chunks: %v, %v", none, err)
	}
	// The count follows this process's writes at once, however lately it
	// was read.
	if count, err := sampler.VectorCount(ctx); err != nil || count != n {
		t.Fatalf("written again: VectorCount = %d, %v; want %d", count, err, n)
	}
	if _, err := one.Delete(ctx, chunks[0].ID, chunks[1].ID); err != nil {
		t.Fatal(err)
	}
	if count, err := sampler.VectorCount(ctx); err != nil || count != n-2 {
		t.Fatalf("two deleted: VectorCount = %d, %v; want %d", count, err, n-2)
	}
	check(t, one.Upsert(ctx, chunks[0]))
	if count, err := sampler.VectorCount(ctx); err != nil || count != n-1 {
		t.Fatalf("one written back: VectorCount = %d, %v; want %d", count, err, n-1)
	}
}

// nearest is the index of the written vector v is (within 1e-3 of each
// component, both unit length), or -1.
func nearest(v []float32, written [][]float32) int {
	return slices.IndexFunc(written, func(w []float32) bool {
		for j := range w {
			if math.Abs(float64(w[j]-v[j])) > 1e-3 {
				return false
			}
		}
		return true
	})
}
