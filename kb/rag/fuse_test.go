package rag_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb/rag"
)

// fuseReference is Fuse as Weaviate's hybrid search reads, written the
// plain way: every hit of either side copied into a merged list, scores
// added, the merged list sorted and cut.
func fuseReference(bm25, vector []rag.Hit, alpha float64, fusion rag.Fusion, limit int) []rag.Hit {
	type acc struct {
		hit       rag.Hit
		bm25, vec float64
	}
	merged := map[string]int{}
	var accs []acc
	add := func(hits []rag.Hit, weight float64, isVector bool) {
		score := func(h rag.Hit) float64 {
			if isVector {
				return h.VectorScore
			}
			return h.BM25Score
		}
		var lo, hi float64
		for i, h := range hits {
			if i == 0 || score(h) < lo {
				lo = score(h)
			}
			if i == 0 || score(h) > hi {
				hi = score(h)
			}
		}
		for rank, h := range hits {
			s := weight / float64(60+rank)
			if fusion != rag.Ranked {
				norm := 1.0
				if hi > lo {
					norm = (score(h) - lo) / (hi - lo)
				}
				s = weight * norm
			}
			i, ok := merged[h.Chunk.ID]
			if !ok {
				i = len(accs)
				accs = append(accs, acc{hit: h})
				merged[h.Chunk.ID] = i
			}
			if isVector {
				accs[i].vec, accs[i].hit.VectorScore = s, h.VectorScore
			} else {
				accs[i].bm25, accs[i].hit.BM25Score = s, h.BM25Score
			}
		}
	}
	add(bm25, 1-alpha, false)
	add(vector, alpha, true)
	var out []rag.Hit
	for _, a := range accs {
		a.hit.Score = a.bm25 + a.vec
		out = append(out, a.hit)
	}
	slices.SortStableFunc(out, func(a, b rag.Hit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return strings.Compare(a.Chunk.ID, b.Chunk.ID)
	})
	return out[:min(limit, len(out))]
}

// Fuse gives what the plain reading gives — the same hits, in the same
// order, with the same three scores and the chunks of the side that found
// them first — on random sides that overlap, tie and repeat scores, for
// both fusions, alphas from 0 to 1 and limits below and above the hits.
func TestFuseAsWeaviateReadsIt(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	side := func(n int, vector bool) []rag.Hit {
		hits := make([]rag.Hit, n)
		used := map[string]bool{}
		for i := range hits {
			id := fmt.Sprint("c", rng.IntN(3*n+1))
			for used[id] {
				id = fmt.Sprint("c", rng.IntN(3*n+1))
			}
			used[id] = true
			s := float64(rng.IntN(6)) // few distinct scores: ties
			h := rag.Hit{Chunk: rag.Chunk{ID: id, SourceURN: fmt.Sprint("urn:", id, vector)}, Score: s}
			if vector {
				h.VectorScore = s
			} else {
				h.BM25Score = s
			}
			hits[i] = h
		}
		// Best first, as the sides return them.
		slices.SortStableFunc(hits, func(a, b rag.Hit) int { return cmp.Compare(b.Score, a.Score) })
		return hits
	}
	for trial := range 500 {
		bm25, vector := side(rng.IntN(40), false), side(rng.IntN(40), true)
		alpha := float64(rng.IntN(11)) / 10
		fusion := []rag.Fusion{rag.Ranked, rag.RelativeScore}[trial%2]
		limit := 1 + rng.IntN(60)
		want := fuseReference(bm25, vector, alpha, fusion, limit)
		got := rag.Fuse(bm25, vector, alpha, fusion, limit)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d (%s, alpha %.1f, limit %d):\ngot  %v\nwant %v", trial, fusion, alpha, limit, got, want)
		}
	}
}
