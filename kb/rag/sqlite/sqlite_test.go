package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/ragtest"
	"github.com/jervis-dev/jervis/kb/rag/sqlite"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ragtest.Exercise(t, func(t *testing.T) rag.Store { return open(t, filepath.Join(t.TempDir(), sqlite.FileName)) })
}

// Two stores on one file stand for two processes: vectors one writes are
// seen by the other's next vector search.
func TestVectorsFollowAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	a, b := open(t, path).For("acme"), open(t, path).For("acme")
	ctx := t.Context()
	c := rag.Chunk{ID: "1", Text: "first", SourceURN: "s", Vector: []float32{1, 0}}
	if err := a.Upsert(ctx, c); err != nil {
		t.Fatal(err)
	}
	if hits, _ := b.NearVector(ctx, rag.Query{Vector: []float32{1, 0}}); len(hits) != 1 {
		t.Fatalf("b sees %d", len(hits))
	}
	c2 := rag.Chunk{ID: "2", Text: "second", SourceURN: "s", Vector: []float32{0, 1}}
	if err := a.Upsert(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	hits, err := b.NearVector(ctx, rag.Query{Vector: []float32{1, 0}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Chunk.ID != "2" {
		t.Fatalf("b after a's writes: %+v", hits)
	}
}

// A query's terms: its distinct words, lower-cased, stop words out;
// punctuation and SQL are only separators.
func TestTerms(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"What is the status of OPS-12?": {"status", "ops", "12"},
		`"; DROP TABLE chunks; --`:      {"drop", "table", "chunks"},
		"café CAFÉ Café":                {"café"},
		"the a of":                      nil,
	} {
		if got := sqlite.Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

// NoText: keyword and hybrid searches rank as they do with texts, and
// leave the texts unread for the caller to read those it keeps; the
// titles come from the index in memory.
func TestNoTextRanksTheSame(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	x := open(t, path).For("acme")
	var chunks []rag.Chunk
	for i, text := range []string{"backup of the gateway", "gateway certificate renewed", "the backup failed twice", "nothing related", "backup backup gateway"} {
		chunks = append(chunks, rag.Chunk{ID: fmt.Sprint(i), Title: "item " + fmt.Sprint(i), Text: text, SourceURN: fmt.Sprint("urn:", i), Vector: []float32{1, float32(i)}})
	}
	if err := x.Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	for _, search := range []func(context.Context, rag.Query) ([]rag.Hit, error){x.BM25, x.Hybrid} {
		q := rag.Query{Text: "backup gateway", Vector: []float32{1, 2}, Alpha: 0.5, Limit: 10}
		want, err := search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		q.NoText = true
		got, err := search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) < 3 || len(got) != len(want) {
			t.Fatalf("%d hits without texts, %d with", len(got), len(want))
		}
		for i := range got {
			if got[i].Chunk.ID != want[i].Chunk.ID || got[i].Score != want[i].Score || want[i].Chunk.Text == "" {
				t.Fatalf("#%d: %+v without texts, %+v with", i, got[i], want[i])
			}
			if got[i].Chunk.Text != "" || got[i].Chunk.Title != want[i].Chunk.Title {
				t.Fatalf("#%d: read its text, or lost its title: %+v", i, got[i].Chunk)
			}
		}
	}
	// Another store on the file (a restart) loads the titles with the index.
	hits, err := open(t, path).For("acme").Hybrid(ctx, rag.Query{Text: "backup", Vector: []float32{1, 2}, Alpha: 0.5, Limit: 10, NoText: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if want := "item " + h.Chunk.ID; h.Chunk.Title != want || h.Chunk.Text != "" {
			t.Fatalf("loaded: %+v, want title %q and no text", h.Chunk, want)
		}
	}
	if len(hits) < 3 {
		t.Fatalf("loaded: %d hits", len(hits))
	}
}

// A chunk ID or graph ref that is not valid UTF-8 is kept byte for byte:
// the chunk is found by its ID, its refs read back as written (from the
// table and from the index a search loads), and it is deleted by its ID.
func TestIDsThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	x := open(t, filepath.Join(t.TempDir(), sqlite.FileName)).For("acme")
	id, refs := "chunk\xff1", []string{"person:\xfeo\xc3", "doc:<a&b>"}
	if err := x.Upsert(ctx, rag.Chunk{ID: id, Text: "the gateway backup", SourceURN: "urn:\xff", GraphRefs: refs, Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	got, err := x.Get(ctx, id)
	if err != nil || len(got) != 1 || got[0].ID != id || got[0].SourceURN != "urn:\xff" || !slices.Equal(got[0].GraphRefs, refs) {
		t.Fatalf("get %q: %+v, %v", id, got, err)
	}
	hits, err := x.BM25(ctx, rag.Query{Text: "gateway", Limit: 5})
	if err != nil || len(hits) != 1 || hits[0].Chunk.ID != id || !slices.Equal(hits[0].Chunk.GraphRefs, refs) {
		t.Fatalf("search: %+v, %v", hits, err)
	}
	if n, err := x.Delete(ctx, id); err != nil || n != 1 {
		t.Fatalf("delete %q: %d, %v", id, n, err)
	}
	if n, err := x.Count(ctx); err != nil || n != 0 {
		t.Fatalf("left: %d, %v", n, err)
	}
}
