// Package graphtest is the conformance suite every graph backend passes.
// Backends call Exercise with a constructor returning a fresh, empty store
// per call, cleaned up with t.Cleanup.
package graphtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb/graph"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) graph.Store

// Exercise runs the suite.
func Exercise(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s graph.Store)
	}{
		{"UpsertMerges", testUpsertMerges},
		{"EvidenceRules", testEvidenceRules},
		{"RemoveEvidence", testRemoveEvidence},
		{"RemoveEvidenceAfterMerges", testRemoveEvidenceAfterMerges},
		{"ClientIsolation", testIsolation},
		{"Neighbors", testNeighbors},
		{"ShortestPath", testShortestPath},
		{"AwkwardKeys", testAwkwardKeys},
		{"ListNodes", testListNodes},
		{"MergeNode", testMergeNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func node(key string, chunks ...string) graph.Node {
	typ := key
	for i := range key {
		if key[i] == ':' {
			typ = key[:i]
			break
		}
	}
	return graph.Node{Key: key, Type: typ, RAGChunks: chunks}
}

func edge(typ, from, to string, evidence ...string) graph.Edge {
	return graph.Edge{Type: typ, From: from, To: to, EvidenceChunkIDs: evidence, Confidence: 0.9, Origin: graph.OriginSyntax}
}

// held is a chunk RemoveEvidence drops and the nodes it was written to
// (its own first).
func held(chunkID string, nodes ...string) graph.Held {
	return graph.Held{ChunkID: chunkID, Nodes: nodes}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testUpsertMerges(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	a := node("person:ann", "c1")
	a.Props, a.FirstSeen, a.LastSeen = map[string]any{"name": "Ann", "team": "ops"}, t2, t2
	check(t, g.UpsertNodes(ctx, a, node("jira:ops-1", "c1")))
	a2 := node("person:ann", "c2")
	a2.Props, a2.FirstSeen, a2.LastSeen = map[string]any{"team": "platform", "email": "ann@acme.test"}, t1, t1
	check(t, g.UpsertNodes(ctx, a2))
	got, err := g.Node(ctx, "person:ann")
	check(t, err)
	if got.Type != "person" || !slices.Equal(got.RAGChunks, []string{"c1", "c2"}) ||
		got.Props["name"] != "Ann" || got.Props["team"] != "platform" || got.Props["email"] != "ann@acme.test" ||
		!got.FirstSeen.Equal(t1) || !got.LastSeen.Equal(t2) {
		t.Fatalf("merged node: %+v", got)
	}
	e := edge("assigned_to", "jira:ops-1", "person:ann", "c1")
	e.Confidence, e.Origin = 0.6, graph.OriginLLM
	check(t, g.UpsertEdges(ctx, e))
	e2 := edge("assigned_to", "jira:ops-1", "person:ann", "c2")
	e2.Confidence, e2.Origin = 1, graph.OriginMetadata
	check(t, g.UpsertEdges(ctx, e2, e2)) // twice: idempotent
	ge, err := g.Edge(ctx, e.Key())
	check(t, err)
	if !slices.Equal(ge.EvidenceChunkIDs, []string{"c1", "c2"}) || ge.Confidence != 1 || ge.Origin != graph.OriginMetadata ||
		ge.From != "jira:ops-1" || ge.To != "person:ann" || ge.Type != "assigned_to" {
		t.Fatalf("merged edge: %+v", ge)
	}
	counts, err := g.CountByType(ctx)
	check(t, err)
	if counts["person"] != 1 || counts["jira"] != 1 || len(counts) != 2 {
		t.Fatalf("counts: %v", counts)
	}
	ecounts, err := g.CountEdgesByType(ctx)
	check(t, err)
	if ecounts["assigned_to"] != 1 || len(ecounts) != 1 {
		t.Fatalf("edge counts: %v", ecounts)
	}
	if _, err := g.Node(ctx, "person:bob"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("missing node: %v", err)
	}
	if _, err := g.Edge(ctx, "x::a->b"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("missing edge: %v", err)
	}
}

func testEvidenceRules(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	check(t, g.UpsertNodes(ctx, node("person:ann", "c1"), node("person:bob", "c1")))
	if err := g.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob")); !errors.Is(err, graph.ErrNoEvidence) {
		t.Fatalf("edge without evidence: %v", err)
	}
	if err := g.UpsertEdges(ctx, edge("knows", "person:ann", "person:zed", "c1")); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("edge to a missing node: %v", err)
	}
	bad := edge("knows", "person:ann", "person:bob", "c1")
	bad.Origin = "guess"
	if err := g.UpsertEdges(ctx, bad); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("bad origin: %v", err)
	}
	for _, c := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		bad := edge("knows", "person:ann", "person:bob", "c1")
		bad.Confidence = c
		if err := g.UpsertEdges(ctx, bad); !errors.Is(err, graph.ErrInvalid) {
			t.Fatalf("confidence %v: %v, want ErrInvalid", c, err)
		}
	}
	for _, n := range []graph.Node{{Key: "", Type: "x"}, {Key: "x:y"}, {Key: string(make([]byte, graph.MaxKeyLen+1)), Type: "x"}} {
		if err := g.UpsertNodes(ctx, n); !errors.Is(err, graph.ErrInvalid) {
			t.Fatalf("bad node %q: %v", n.Key, err)
		}
	}
	// A rejected batch writes nothing.
	if err := g.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob", "c1"), edge("knows", "person:bob", "person:ann")); err == nil {
		t.Fatal("batch with a bad edge accepted")
	}
	if _, err := g.Edge(ctx, graph.EdgeKey("knows", "person:ann", "person:bob")); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("part of a rejected batch was written: %v", err)
	}
}

func testRemoveEvidence(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	// doc:1 (chunks c1, c2) mentions ann and bob; ann -> bob is supported by c1 and c2,
	// bob -> carol only by c2; carol has no chunks of her own.
	check(t, g.UpsertNodes(ctx, node("doc:1", "c1", "c2"), node("person:ann", "c1"), node("person:bob", "c1", "c2"), node("person:carol")))
	check(t, g.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob", "c1", "c2"), edge("knows", "person:bob", "person:carol", "c2")))

	// What each chunk was written to (for the knowledge base, the chunk's
	// own node and its graph refs: the ends of the edges it supports).
	c1 := held("c1", "doc:1", "person:ann", "person:bob")
	c2 := held("c2", "doc:1", "person:ann", "person:bob", "person:carol")
	r, err := g.RemoveEvidence(ctx, []graph.Held{c2})
	check(t, err)
	if r.EdgesUpdated != 1 || r.EdgesDeleted != 1 || r.NodesDeleted != 1 {
		t.Fatalf("remove c2: %+v", r)
	}
	ab, err := g.Edge(ctx, graph.EdgeKey("knows", "person:ann", "person:bob"))
	check(t, err)
	if !slices.Equal(ab.EvidenceChunkIDs, []string{"c1"}) {
		t.Fatalf("ann->bob evidence: %v", ab.EvidenceChunkIDs)
	}
	if _, err := g.Edge(ctx, graph.EdgeKey("knows", "person:bob", "person:carol")); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("edge with no evidence left survived: %v", err)
	}
	if _, err := g.Node(ctx, "person:carol"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("node with no chunks and no edges survived: %v", err)
	}
	bob, err := g.Node(ctx, "person:bob")
	check(t, err)
	if !slices.Equal(bob.RAGChunks, []string{"c1"}) {
		t.Fatalf("bob chunks: %v", bob.RAGChunks)
	}
	// The last evidence goes: everything goes.
	r, err = g.RemoveEvidence(ctx, []graph.Held{c1})
	check(t, err)
	if r.EdgesDeleted != 1 || r.NodesDeleted != 3 {
		t.Fatalf("remove c1: %+v", r)
	}
	counts, err := g.CountByType(ctx)
	check(t, err)
	if len(counts) != 0 {
		t.Fatalf("left: %v", counts)
	}
	if r, err := g.RemoveEvidence(ctx, nil); err != nil || r != (graph.Removed{}) {
		t.Fatalf("remove nothing: %+v %v", r, err)
	}
}

// A chunk given with the keys it was written to leaves the nodes those
// were merged into since (a chain of two merges), and the edges that moved
// with them.
func testRemoveEvidenceAfterMerges(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	check(t, g.UpsertNodes(ctx, node("doc:1", "c1", "c2"), node("person:ann", "c1"), node("person:bob", "c1")))
	check(t, g.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob", "c1")))
	for _, m := range [][2]string{{"person:ann", "person:anne"}, {"person:anne", "person:anna"}} {
		if _, err := g.MergeNode(ctx, m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}
	r, err := g.RemoveEvidence(ctx, []graph.Held{held("c1", "doc:1", "person:ann", "person:bob")})
	check(t, err)
	if r.EdgesDeleted != 1 || r.NodesDeleted != 2 {
		t.Fatalf("removed %+v, want the knows edge and anna and bob", r)
	}
	if n, err := g.Node(ctx, "person:anna"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("anna kept what ann was given: %+v %v", n, err)
	}
	doc, err := g.Node(ctx, "doc:1")
	check(t, err)
	if !slices.Equal(doc.RAGChunks, []string{"c2"}) {
		t.Fatalf("doc:1 chunks %v", doc.RAGChunks)
	}
}

func testIsolation(t *testing.T, s graph.Store) {
	ctx := t.Context()
	a, b := s.For("acme"), s.For("globex")
	check(t, a.UpsertNodes(ctx, node("person:ann", "c1"), node("person:bob", "c1")))
	check(t, a.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob", "c1")))
	if _, err := b.Node(ctx, "person:ann"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("globex sees acme's node: %v", err)
	}
	if _, err := b.Edge(ctx, graph.EdgeKey("knows", "person:ann", "person:bob")); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("globex sees acme's edge: %v", err)
	}
	// globex cannot attach an edge to acme's nodes either.
	if err := b.UpsertEdges(ctx, edge("knows", "person:ann", "person:bob", "c1")); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("cross-client edge: %v", err)
	}
	hood, err := b.Neighbors(ctx, graph.NeighborQuery{Start: []string{"person:ann"}, Depth: 2})
	check(t, err)
	if len(hood.Nodes) != 0 || len(hood.Edges) != 0 {
		t.Fatalf("globex traverses acme: %+v", hood)
	}
	// globex removing the same chunk IDs leaves acme untouched.
	_, err = b.RemoveEvidence(ctx, []graph.Held{held("c1", "person:ann", "person:bob")})
	check(t, err)
	if _, err := a.Edge(ctx, graph.EdgeKey("knows", "person:ann", "person:bob")); err != nil {
		t.Fatalf("acme lost an edge to globex's removal: %v", err)
	}
	counts, err := b.CountByType(ctx)
	check(t, err)
	if len(counts) != 0 {
		t.Fatalf("globex counts: %v", counts)
	}
	// Dropping a graph takes the client's nodes and edges, no one else's.
	check(t, b.UpsertNodes(ctx, node("person:ann", "g1")))
	check(t, b.Drop(ctx))
	if _, err := b.Node(ctx, "person:ann"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("globex's node survived the drop: %v", err)
	}
	if _, err := a.Edge(ctx, graph.EdgeKey("knows", "person:ann", "person:bob")); err != nil {
		t.Fatalf("acme lost an edge to globex's drop: %v", err)
	}
	check(t, a.Drop(ctx))
	if counts, _ := a.CountByType(ctx); len(counts) != 0 {
		t.Fatalf("acme after drop: %v", counts)
	}
	if edges, _ := a.CountEdgesByType(ctx); len(edges) != 0 {
		t.Fatalf("acme's edges after drop: %v", edges)
	}
}

// chain builds a -> b -> c -> d -> e plus a -> x (type "cc").
func chain(t *testing.T, g graph.Graph) {
	t.Helper()
	ctx := t.Context()
	var ns []graph.Node
	for _, k := range []string{"n:a", "n:b", "n:c", "n:d", "n:e", "n:x"} {
		ns = append(ns, node(k, "c"))
	}
	check(t, g.UpsertNodes(ctx, ns...))
	check(t, g.UpsertEdges(ctx, edge("next", "n:a", "n:b", "c"), edge("next", "n:b", "n:c", "c"), edge("next", "n:c", "n:d", "c"),
		edge("next", "n:d", "n:e", "c"), edge("cc", "n:a", "n:x", "c")))
}

func keysOf(h graph.Neighborhood) []string {
	var out []string
	for _, v := range h.Nodes {
		out = append(out, fmt.Sprintf("%s@%d", v.Key, v.Depth))
	}
	return out
}

func testNeighbors(t *testing.T, s graph.Store) {
	g := s.For("acme")
	chain(t, g)
	ctx := t.Context()
	for _, tc := range []struct {
		q         graph.NeighborQuery
		want      []string
		wantEdges int
	}{
		{graph.NeighborQuery{Start: []string{"n:a"}, Depth: 0}, []string{"n:a@0"}, 0},
		{graph.NeighborQuery{Start: []string{"n:a"}, Depth: 2}, []string{"n:a@0", "n:b@1", "n:x@1", "n:c@2"}, 3},
		{graph.NeighborQuery{Start: []string{"n:c"}, Depth: 1, Direction: graph.In}, []string{"n:c@0", "n:b@1"}, 1},
		{graph.NeighborQuery{Start: []string{"n:c"}, Depth: 1, Direction: graph.Out}, []string{"n:c@0", "n:d@1"}, 1},
		{graph.NeighborQuery{Start: []string{"n:c"}, Depth: 2}, []string{"n:c@0", "n:b@1", "n:d@1", "n:a@2", "n:e@2"}, 4},
		{graph.NeighborQuery{Start: []string{"n:a"}, Depth: 3, EdgeTypes: []string{"cc"}}, []string{"n:a@0", "n:x@1"}, 1},
		{graph.NeighborQuery{Start: []string{"n:a", "n:e"}, Depth: 1}, []string{"n:a@0", "n:e@0", "n:b@1", "n:d@1", "n:x@1"}, 3},
		{graph.NeighborQuery{Start: []string{"n:a"}, Depth: 5, Limit: 3}, []string{"n:a@0", "n:b@1", "n:x@1"}, 2},
		{graph.NeighborQuery{Start: []string{"n:missing"}, Depth: 2}, nil, 0},
	} {
		h, err := g.Neighbors(ctx, tc.q)
		check(t, err)
		if got := keysOf(h); !slices.Equal(got, tc.want) || len(h.Edges) != tc.wantEdges {
			t.Errorf("%+v: nodes %v (%d edges), want %v (%d edges)", tc.q, got, len(h.Edges), tc.want, tc.wantEdges)
		}
		for _, e := range h.Edges {
			if len(e.EvidenceChunkIDs) == 0 {
				t.Errorf("edge %s returned without evidence", e.Key())
			}
		}
	}
	// A cycle terminates.
	check(t, g.UpsertEdges(ctx, edge("next", "n:e", "n:a", "c")))
	h, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"n:a"}, Depth: 5})
	check(t, err)
	if len(h.Nodes) != 6 {
		t.Fatalf("cycle: %v", keysOf(h))
	}
	for _, q := range []graph.NeighborQuery{{Depth: 1}, {Start: []string{"n:a"}, Depth: 9}, {Start: []string{"n:a"}, Direction: "up"}} {
		if _, err := g.Neighbors(ctx, q); !errors.Is(err, graph.ErrInvalid) {
			t.Errorf("%+v: err = %v", q, err)
		}
	}
}

func testShortestPath(t *testing.T, s graph.Store) {
	g := s.For("acme")
	chain(t, g)
	ctx := t.Context()
	p, err := g.ShortestPath(ctx, "n:x", "n:d", 5)
	check(t, err)
	var keys []string
	for _, n := range p.Nodes {
		keys = append(keys, n.Key)
	}
	if !slices.Equal(keys, []string{"n:x", "n:a", "n:b", "n:c", "n:d"}) || len(p.Edges) != 4 || p.Edges[0].Type != "cc" {
		t.Fatalf("path %v with %d edges", keys, len(p.Edges))
	}
	if _, err := g.ShortestPath(ctx, "n:x", "n:e", 3); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("path longer than maxDepth: %v", err)
	}
	if _, err := g.ShortestPath(ctx, "n:a", "n:nowhere", 3); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("path to a missing node: %v", err)
	}
	p, err = g.ShortestPath(ctx, "n:c", "n:c", 3)
	check(t, err)
	if len(p.Nodes) != 1 || len(p.Edges) != 0 {
		t.Fatalf("path to itself: %+v", p)
	}
}

func testAwkwardKeys(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	keys := []string{"url:https://x.test/a b?c=d&e=/f", "person:o'brien", "file:src/main.go", "topic:naïve café", "odd:a->b::c"}
	var ns []graph.Node
	for _, k := range keys {
		ns = append(ns, node(k, "c1"))
	}
	check(t, g.UpsertNodes(ctx, ns...))
	check(t, g.UpsertEdges(ctx, edge("links", keys[0], keys[4], "c1"), edge("touches", keys[2], keys[3], "c1")))
	for _, k := range keys {
		n, err := g.Node(ctx, k)
		check(t, err)
		if n.Key != k {
			t.Fatalf("key %q came back as %q", k, n.Key)
		}
	}
	e, err := g.Edge(ctx, graph.EdgeKey("links", keys[0], keys[4]))
	check(t, err)
	if e.From != keys[0] || e.To != keys[4] {
		t.Fatalf("edge endpoints: %q %q", e.From, e.To)
	}
	_, err = g.RemoveEvidence(ctx, []graph.Held{held("c1", keys...)})
	check(t, err)
	counts, err := g.CountByType(ctx)
	check(t, err)
	if len(counts) != 0 {
		t.Fatalf("left after removing the only evidence: %v", counts)
	}
}

func testListNodes(t *testing.T, s graph.Store) {
	ctx := t.Context()
	g := s.For("acme")
	check(t, g.UpsertNodes(ctx, node("person:ann", "c2", "c1"), node("person:Bob", "c1"), node("person:bob", "c1"), node("jira:OPS-1", "c3"),
		node("person:50%_off", "c4")))
	check(t, s.For("globex").UpsertNodes(ctx, node("person:zed", "z1")))
	var keys []string
	after := ""
	for {
		page, err := g.ListNodes(ctx, graph.NodeQuery{Type: "person", Limit: 2, After: after})
		check(t, err)
		if len(page) == 0 {
			break
		}
		for _, n := range page {
			keys = append(keys, n.Key)
		}
		after = page[len(page)-1].Key
	}
	if want := []string{"person:50%_off", "person:Bob", "person:ann", "person:bob"}; !slices.Equal(keys, want) {
		t.Fatalf("person pages: %v, want %v", keys, want)
	}
	first, err := g.ListNodes(ctx, graph.NodeQuery{Prefix: "person:a"})
	check(t, err)
	if len(first) != 1 || first[0].Key != "person:ann" || !slices.Equal(first[0].RAGChunks, []string{"c1", "c2"}) {
		t.Fatalf("prefix person:a: %+v", first)
	}
	if got, _ := g.ListNodes(ctx, graph.NodeQuery{Prefix: "person:B"}); len(got) != 1 || got[0].Key != "person:Bob" {
		t.Fatalf("prefix is case-sensitive: %+v", got)
	}
	if got, _ := g.ListNodes(ctx, graph.NodeQuery{Prefix: "person:50%"}); len(got) != 1 {
		t.Fatalf("a prefix with %%: %+v", got)
	}
	if _, err := g.ListNodes(ctx, graph.NodeQuery{Limit: 5000}); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("limit 5000: %v", err)
	}
}

// testMergeNode: a person known under two keys becomes one node; every
// edge and chunk link moves with its evidence, an edge between the two is
// dropped, a repeated merge changes nothing, and the neighbourhood of an
// issue reaches what the alias was joined to.
func testMergeNode(t *testing.T, s graph.Store) {
	g := s.For("acme")
	ctx := t.Context()
	t1, t2 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	ann, alias := node("person:ann@acme.test", "c1"), node("person:ann", "c2", "c3")
	ann.Props, alias.Props = map[string]any{"name": "Ann"}, map[string]any{"name": "ann", "account": "ann"}
	ann.FirstSeen, alias.FirstSeen = t2, t1
	check(t, g.UpsertNodes(ctx, ann, alias, node("jira:ops-1", "c4"), node("commit:abc", "c5"), node("person:bob", "c6")))
	check(t, g.UpsertEdges(ctx,
		edge("assigned_to", "jira:ops-1", "person:ann", "c4"),
		edge("authored_by", "commit:abc", "person:ann@acme.test", "c5"),
		edge("knows", "person:ann", "person:bob", "c2"),
		edge("knows", "person:ann@acme.test", "person:bob", "c1"),
		edge("same_as", "person:ann", "person:ann@acme.test", "c3"),
	))
	if _, err := g.MergeNode(ctx, "person:ann", "person:ann"); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("merge into itself: %v, want ErrInvalid", err)
	}
	m, err := g.MergeNode(ctx, "person:ann", "person:ann@acme.test")
	check(t, err)
	if m.EdgesMoved != 2 || m.EdgesDropped != 1 || !m.NodeDeleted {
		t.Fatalf("merged %+v, want 2 edges moved, 1 dropped, the alias deleted", m)
	}
	if _, err := g.Node(ctx, "person:ann"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("alias still a node: %v", err)
	}
	got, err := g.Node(ctx, "person:ann@acme.test")
	check(t, err)
	if !slices.Equal(got.RAGChunks, []string{"c1", "c2", "c3"}) || got.Props["name"] != "Ann" || got.Props["account"] != "ann" || !got.FirstSeen.Equal(t1) {
		t.Fatalf("canonical after the merge: %+v", got)
	}
	e, err := g.Edge(ctx, graph.EdgeKey("assigned_to", "jira:ops-1", "person:ann@acme.test"))
	check(t, err)
	if !slices.Equal(e.EvidenceChunkIDs, []string{"c4"}) || e.Origin != graph.OriginSyntax || e.Confidence != 0.9 {
		t.Fatalf("moved edge: %+v", e)
	}
	knows, err := g.Edge(ctx, graph.EdgeKey("knows", "person:ann@acme.test", "person:bob"))
	check(t, err)
	if !slices.Equal(knows.EvidenceChunkIDs, []string{"c1", "c2"}) {
		t.Fatalf("an edge moved onto an existing one keeps both evidences: %v", knows.EvidenceChunkIDs)
	}
	for _, k := range []string{graph.EdgeKey("assigned_to", "jira:ops-1", "person:ann"), graph.EdgeKey("knows", "person:ann", "person:bob"),
		graph.EdgeKey("same_as", "person:ann", "person:ann@acme.test")} {
		if _, err := g.Edge(ctx, k); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("old edge %s still there: %v", k, err)
		}
	}
	hood, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"jira:ops-1"}, Depth: 2})
	check(t, err)
	var keys []string
	for _, n := range hood.Nodes {
		keys = append(keys, n.Key)
	}
	if !slices.Contains(keys, "commit:abc") || slices.Contains(keys, "person:ann") {
		t.Fatalf("depth 2 from the issue after the merge: %v, want the commit of its assignee", keys)
	}
	again, err := g.MergeNode(ctx, "person:ann", "person:ann@acme.test")
	check(t, err)
	if again != (graph.Merged{}) {
		t.Fatalf("a repeated merge changed %+v", again)
	}
	// Into a key with no node yet: it is created with the alias's type.
	check(t, g.UpsertNodes(ctx, node("person:bobby", "c7")))
	check(t, g.UpsertEdges(ctx, edge("knows", "person:bob", "person:bobby", "c7")))
	_, err = g.MergeNode(ctx, "person:bob", "person:robert@acme.test")
	check(t, err)
	rob, err := g.Node(ctx, "person:robert@acme.test")
	check(t, err)
	if rob.Type != "person" || !slices.Equal(rob.RAGChunks, []string{"c6"}) {
		t.Fatalf("new canonical: %+v", rob)
	}
	if _, err := g.Edge(ctx, graph.EdgeKey("knows", "person:ann@acme.test", "person:robert@acme.test")); err != nil {
		t.Fatalf("edge moved at its other end: %v", err)
	}
	if _, err := s.For("other").MergeNode(ctx, "person:bobby", "person:robert@acme.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Node(ctx, "person:bobby"); err != nil {
		t.Fatalf("another client's merge touched this one: %v", err)
	}
}
