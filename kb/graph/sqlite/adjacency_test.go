package sqlite

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jervis-dev/jervis/kb/graph"
)

// The adjacency kept current by a process's own writes walks like one
// loaded afresh from the database, through random upserts, evidence
// removals and drops; and a write by another process (another Store on the
// same file) is seen at the next walk.
func TestAdjacencyStaysCurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), FileName)
	live, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	r := rand.New(rand.NewPCG(9, 9))
	node := func() string { return fmt.Sprintf("n:%d", r.IntN(40)) }
	walk := func(s *Store, q graph.NeighborQuery) graph.Neighborhood {
		hood, err := s.For("acme").Neighbors(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return hood
	}
	// What each chunk was written to, as the knowledge base knows it
	// (graph.Held): the ends of the edges it is evidence of, the nodes
	// given it.
	wrote := map[string][]string{}
	held := func(c string) graph.Held { return graph.Held{ChunkID: c, Nodes: wrote[c]} }
	for step := range 300 {
		writer := live
		if step%10 == 9 {
			writer = other // another process
		}
		g := writer.For("acme")
		switch op := r.IntN(20); {
		case op < 8:
			a, b := node(), node()
			if err := g.UpsertNodes(ctx, graph.Node{Key: a, Type: "n"}, graph.Node{Key: b, Type: "n"}); err != nil {
				t.Fatal(err)
			}
			e := graph.Edge{Type: []string{"knows", "owns"}[r.IntN(2)], From: a, To: b, Confidence: 1, Origin: graph.OriginMetadata,
				EvidenceChunkIDs: []string{fmt.Sprintf("c%d", r.IntN(25))}}
			if err := g.UpsertEdges(ctx, e); err != nil {
				t.Fatal(err)
			}
			c := e.EvidenceChunkIDs[0]
			wrote[c] = append(wrote[c], a, b)
		case op < 18:
			if _, err := g.RemoveEvidence(ctx, []graph.Held{held(fmt.Sprintf("c%d", r.IntN(25))), held(fmt.Sprintf("c%d", r.IntN(25)))}); err != nil {
				t.Fatal(err)
			}
		case op < 19:
			k := node()
			if err := g.UpsertNodes(ctx, graph.Node{Key: k, Type: "n", RAGChunks: []string{"c1"}}); err != nil {
				t.Fatal(err)
			}
			wrote["c1"] = append(wrote["c1"], k)
		default:
			if step%50 == 0 {
				if err := g.Drop(ctx); err != nil {
					t.Fatal(err)
				}
				clear(wrote)
			}
		}
		fresh, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			q := graph.NeighborQuery{Start: []string{node(), node()}, Depth: 1 + r.IntN(3), Limit: 1 + r.IntN(12),
				Direction: []graph.Direction{graph.Any, graph.Out, graph.In}[r.IntN(3)]}
			if r.IntN(3) == 0 {
				q.EdgeTypes = []string{"owns"}
			}
			got, want := walk(live, q), walk(fresh, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %+v:\n live  %+v\n fresh %+v", step, q, got, want)
			}
		}
		fresh.Close()
	}
}

// Preload loads every client's graph structure ahead of its first walk.
func TestGraphPreload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	g := s.For("acme")
	if err := g.UpsertNodes(ctx, graph.Node{Key: "a:1", Type: "a"}, graph.Node{Key: "b:1", Type: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertEdges(ctx, graph.Edge{Type: "knows", From: "a:1", To: "b:1", Confidence: 1, Origin: graph.OriginMetadata, EvidenceChunkIDs: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	s.adjacencyOf("acme").gen = -1 // as after a restart
	loaded := map[string]int{}
	if err := s.Preload(ctx, func(client string, edges int, _ time.Duration) { loaded[client] = edges }); err != nil {
		t.Fatal(err)
	}
	if loaded["acme"] != 1 || s.adjacencyOf("acme").gen < 1 {
		t.Fatalf("preloaded %v, gen %d", loaded, s.adjacencyOf("acme").gen)
	}
}

// The arcs, which hold no edge key, sort as their keys (graph.EdgeKey) do
// in the database's indexes, even for keys made of "-" and ">".
func TestArcsSortAsTheirEdgeKeys(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	word := func() string {
		b := make([]byte, r.IntN(5))
		for i := range b {
			b[i] = "a->b"[r.IntN(4)]
		}
		return string(b)
	}
	for range 200 {
		end := word()
		var a adjacency
		a.reset()
		var in, out []arc
		seen := map[arc]bool{}
		for range 20 {
			x := arc{a.typ([]string{"knows", "owns"}[r.IntN(2)]), a.id(word())}
			if !seen[x] {
				seen[x] = true
				in, out = append(in, x), append(out, x)
			}
		}
		slices.SortFunc(in, a.compareIn(end))
		slices.SortFunc(out, a.compareOut)
		if !slices.IsSortedFunc(in, func(x, y arc) int {
			return strings.Compare(graph.EdgeKey(a.typeOf(x), a.otherOf(x), end), graph.EdgeKey(a.typeOf(y), a.otherOf(y), end))
		}) {
			t.Fatalf("arcs into %q not in key order: %v", end, in)
		}
		if !slices.IsSortedFunc(out, func(x, y arc) int {
			return strings.Compare(graph.EdgeKey(a.typeOf(x), end, a.otherOf(x)), graph.EdgeKey(a.typeOf(y), end, a.otherOf(y)))
		}) {
			t.Fatalf("arcs out of %q not in key order: %v", end, out)
		}
	}
}

// A key a write numbers is kept as a copy: a key may be a slice of a
// larger text (a mention found in it), which the structure would
// otherwise keep in memory.
func TestAdjacencyKeepsCopiesOfKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	g := s.For("acme")
	if _, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"x:0"}, Depth: 1, Limit: 1}); err != nil {
		t.Fatal(err) // loads the (empty) structure: the writes below change it in place
	}
	text := "see person:alice and person:bob in " + strings.Repeat("x", 4096)
	a, b := text[4:16], text[21:31]
	if err := g.UpsertNodes(ctx, graph.Node{Key: a, Type: "person"}, graph.Node{Key: b, Type: "person"}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertEdges(ctx, graph.Edge{Type: "knows", From: a, To: b, Confidence: 1, Origin: graph.OriginSyntax, EvidenceChunkIDs: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	adj := s.adjacencyOf("acme")
	adj.mu.RLock()
	defer adj.mu.RUnlock()
	if adj.gen < 0 || !adj.hasNode(a) || len(adj.arcs(a, false)) != 1 {
		t.Fatalf("the writes were not applied in place: gen %d, %d keys", adj.gen, adj.keys.Len())
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	for n := range adj.keys.Len() {
		k := adj.keys.Str(uint32(n))
		if p := uintptr(unsafe.Pointer(unsafe.StringData(k))); p >= start && p < start+uintptr(len(text)) {
			t.Fatalf("%q is kept as a slice of its text", k)
		}
	}
}

// openTemp opens a graph store in a temporary directory, closed with the
// test.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The arc lists, all in one slice, hold what per-node slices would through
// random inserts and removals, many enough that lists move many times; the
// slice stays under twice the rooms the lists have.
func TestArcListsHoldWhatSlicesWould(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	var l arcLists
	var want [][]arc
	for range 3000 {
		l.add()
		want = append(want, nil)
	}
	check := func(step int) {
		t.Helper()
		for n, w := range want {
			if got := l.list(int32(n)); !slices.Equal(got, w) {
				t.Fatalf("step %d: node %d holds %v, want %v", step, n, got, w)
			}
		}
	}
	for step := range 100_000 {
		n := r.IntN(len(want))
		x := arc{int32(r.IntN(3)), int32(r.IntN(50))}
		cmpArc := func(a, b arc) int { return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.other, b.other)) }
		i, found := slices.BinarySearchFunc(want[n], x, cmpArc)
		switch {
		case found && r.IntN(4) == 0:
			if !l.remove(int32(n), x) {
				t.Fatalf("step %d: %v not removed from node %d", step, x, n)
			}
			want[n] = slices.Delete(want[n], i, i+1)
		case !found:
			l.insert(int32(n), i, x)
			want[n] = slices.Insert(want[n], i, x)
		}
		rooms := 0
		for _, s := range l.at {
			rooms += int(s.room)
		}
		if len(l.pool) >= 2*rooms {
			t.Fatalf("step %d: %d arcs for rooms of %d", step, len(l.pool), rooms)
		}
		if step%10_000 == 0 {
			check(step)
		}
	}
	check(-1)
	if l.remove(0, arc{9, 9}) {
		t.Fatal("an arc never inserted was removed")
	}
	// A load's lists: each exactly its size, one after another.
	counts := []uint32{2, 0, 1}
	l.sized(counts)
	l.push(2, arc{1, 1})
	l.push(0, arc{0, 5})
	l.push(0, arc{0, 6})
	if !slices.Equal(l.list(0), []arc{{0, 5}, {0, 6}}) || len(l.list(1)) != 0 || !slices.Equal(l.list(2), []arc{{1, 1}}) || len(l.pool) != 3 {
		t.Fatalf("sized lists: %v %v %v, pool %d", l.list(0), l.list(1), l.list(2), len(l.pool))
	}
}
