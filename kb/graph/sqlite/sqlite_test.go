package sqlite_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/graph/graphtest"
	"github.com/jervis-dev/jervis/kb/graph/sqlite"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	graphtest.Exercise(t, func(t *testing.T) graph.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), sqlite.FileName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A node's chunks and an edge's evidence go in one statement when there are
// several: IDs that JSON escapes come back as they were, a repeated one
// once, one that is not valid UTF-8 (which JSON cannot carry) is written
// alone, and a second upsert adds to what is there.
func TestChunkLinksKeepTheirIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.For("acme")
	odd := []string{`c"1`, `c\2`, "c<3>&", "ç4", "c\u20285", "c1", "c1"}
	if err := g.UpsertNodes(ctx, graph.Node{Key: "a", Type: "Doc", RAGChunks: odd}, graph.Node{Key: "b", Type: "Doc", RAGChunks: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertNodes(ctx, graph.Node{Key: "a", Type: "Doc", RAGChunks: []string{"c1", "c6", "c7"}}); err != nil {
		t.Fatal(err)
	}
	bad := "c\xff8"
	if err := g.UpsertEdges(ctx, graph.Edge{From: "a", To: "b", Type: "REFERS_TO", Origin: graph.OriginSyntax, Confidence: 0.9, EvidenceChunkIDs: odd}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertEdges(ctx, graph.Edge{From: "a", To: "b", Type: "REFERS_TO", Origin: graph.OriginSyntax, Confidence: 0.9, EvidenceChunkIDs: []string{"c9", bad}}); err != nil {
		t.Fatal(err)
	}
	n, err := g.Node(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`c"1`, `c\2`, "c<3>&", "ç4", "c\u20285", "c1", "c6", "c7"}
	if got := sorted(n.RAGChunks); !slices.Equal(got, sorted(want)) {
		t.Errorf("node chunks %q, want %q", got, sorted(want))
	}
	e, err := g.Edge(ctx, graph.Edge{From: "a", To: "b", Type: "REFERS_TO"}.Key())
	if err != nil {
		t.Fatal(err)
	}
	// The ID that is not valid UTF-8 comes back byte for byte.
	want = []string{`c"1`, `c\2`, "c<3>&", "ç4", "c\u20285", "c1", "c9", bad}
	if got := sorted(e.EvidenceChunkIDs); !slices.Equal(got, sorted(want)) {
		t.Errorf("edge evidence %q, want %q", got, sorted(want))
	}
	// A node whose key is not valid UTF-8 is found by its key, and its
	// edges by their ends; evidence of an invalid ID is removed by it.
	odder := "person:\xffo\xc3"
	if err := g.UpsertNodes(ctx, graph.Node{Key: odder, Type: "Person", RAGChunks: []string{bad, "c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertEdges(ctx, graph.Edge{From: "a", To: odder, Type: "MENTIONS", Origin: graph.OriginSyntax, Confidence: 0.9, EvidenceChunkIDs: []string{bad}}); err != nil {
		t.Fatal(err)
	}
	n, err = g.Node(ctx, odder)
	if err != nil || n.Key != odder || !slices.Equal(sorted(n.RAGChunks), sorted([]string{bad, "c1"})) {
		t.Fatalf("node %q: %+v, %v", odder, n, err)
	}
	hood, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{odder}, Depth: 1, Limit: 10})
	if err != nil || len(hood.Edges) != 1 || hood.Edges[0].From != "a" || !slices.Equal(hood.Edges[0].EvidenceChunkIDs, []string{bad}) {
		t.Fatalf("neighbours of %q: %+v, %v", odder, hood, err)
	}
	list, err := g.ListNodes(ctx, graph.NodeQuery{Type: "Person", Limit: 10})
	if err != nil || len(list) != 1 || list[0].Key != odder || !slices.Equal(sorted(list[0].RAGChunks), sorted([]string{bad, "c1"})) {
		t.Fatalf("listed %+v, %v", list, err)
	}
	if _, err := g.RemoveEvidence(ctx, []graph.Held{{ChunkID: bad, Nodes: []string{odder, "a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Edge(ctx, graph.Edge{From: "a", To: odder, Type: "MENTIONS"}.Key()); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("the edge whose only evidence was removed: %v", err)
	}
	if n, err = g.Node(ctx, odder); err != nil || !slices.Equal(n.RAGChunks, []string{"c1"}) {
		t.Errorf("node %q after the removal: %+v, %v", odder, n, err)
	}
}

func sorted(xs []string) []string {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs
}
