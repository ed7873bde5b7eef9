package kb_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// A vector search compares the query by what sets it apart from the
// client's chunks: the direction they all share (here most of the query
// too) is removed from the query once the client has ten chunks per
// dimension, estimated again when they grow by a tenth.
func TestSearchRemovesTheClientsCommonDirection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const query = "database migration failed on the orders table"
	qv, err := embedder().Embed(ctx, []string{query})
	if err != nil {
		t.Fatal(err)
	}
	q := qv[0]
	dim := len(q)
	rng := rand.New(rand.NewPCG(1, 2))
	randomUnit := func() []float64 {
		v := make([]float64, dim)
		for j := range v {
			v[j] = rng.NormFloat64()
		}
		return unit(v)
	}
	// u: the common direction, mostly the query's; s: what of the query
	// u leaves.
	r := randomUnit()
	qd := make([]float64, dim)
	for j := range qd {
		qd[j] = float64(q[j])
	}
	r = unit(minus(r, scale(qd, dot(r, qd))))
	u := unit(plus(scale(qd, 2), r))
	s := unit(minus(qd, scale(u, dot(qd, u))))
	common := func(i int) rag.Chunk {
		return chunk(fmt.Sprintf("common-%04d", i), plus(u, scale(randomUnit(), 0.2)))
	}
	x := e.chunks.For("acme")
	var batch []rag.Chunk
	for i := range 9 * dim {
		batch = append(batch, common(i))
	}
	batch = append(batch, chunk("specific", s))
	if err := x.Upsert(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	first := func() string {
		t.Helper()
		pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: query, Alpha: ptr(1.0), Group: kb.GroupPassage,
			Limit: 3, Expand: ptr(0), NoFeedback: true})
		if err != nil {
			t.Fatal(err)
		}
		return firstPassage(pack)
	}
	if got := first(); got == "specific" {
		t.Fatalf("with %d chunks (under 10 per dimension) the raw query already finds the specific chunk first: the test shows nothing", 9*dim+1)
	}
	batch = batch[:0]
	for i := 9 * dim; i < 12*dim; i++ {
		batch = append(batch, common(i))
	}
	if err := x.Upsert(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != "specific" {
		t.Fatalf("with %d chunks the query without the common direction finds %s first, want the specific chunk", 12*dim+1, got)
	}
	// Another client's chunks are another estimate: this one has too few.
	if err := e.chunks.For("globex").Upsert(ctx, chunk("specific", s), chunk("common", u)); err != nil {
		t.Fatal(err)
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "globex", Query: query, Alpha: ptr(1.0), Group: kb.GroupPassage, Limit: 1, Expand: ptr(0), NoFeedback: true})
	if err != nil || firstPassage(pack) != "common" {
		t.Fatalf("a client of 2 chunks: %s first, %v; want the raw query's best, the common chunk", firstPassage(pack), err)
	}
}

// firstPassage is the chunk ID of a pack's first passage, or "".
func firstPassage(pack kb.EvidencePack) string {
	for _, it := range pack.Items {
		if it.Kind == kb.ItemPassage {
			return it.ChunkID
		}
	}
	return ""
}

func chunk(id string, v []float64) rag.Chunk {
	f := make([]float32, len(v))
	for j, x := range v {
		f[j] = float32(x)
	}
	return rag.Chunk{ID: id, Text: "chunk " + id, SourceURN: "doc:" + id, SourceType: "JIRA", Kind: "issue", NodeKey: "doc:" + id, Vector: f}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for j := range a {
		s += a[j] * b[j]
	}
	return s
}

func scale(a []float64, k float64) []float64 {
	out := make([]float64, len(a))
	for j := range a {
		out[j] = a[j] * k
	}
	return out
}

func plus(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for j := range a {
		out[j] = a[j] + b[j]
	}
	return out
}

func minus(a, b []float64) []float64 { return plus(a, scale(b, -1)) }

func unit(a []float64) []float64 { return scale(a, 1/math.Sqrt(dot(a, a))) }
