package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jervis-dev/jervis/kb/benchcorpus"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	"github.com/jervis-dev/jervis/kb/rag"
)

// dotsI8 (AVX2 where the CPU has it) agrees with the plain Go loop at every
// stride up to 160, at the extremes of int8 and int16.
func TestDotsI8MatchPlainGo(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for stride := 16; stride <= 160; stride += 16 {
		const rows = 9
		q := make([]int16, stride)
		flat := make([]int8, rows*stride)
		for i := range q {
			q[i] = int16(r.IntN(65535) - 32767)
		}
		for i := range flat {
			flat[i] = int8(r.IntN(255) - 127)
		}
		flat[0], q[0] = -127, -32767
		got, want := make([]int32, rows), make([]int32, rows)
		dotsI8(q, flat, stride, got)
		dotsI8Go(q, flat, stride, want)
		if !slices.Equal(got, want) {
			t.Fatalf("stride %d: %v, plain Go %v", stride, got, want)
		}
	}
	dotsI8(make([]int16, 16), nil, 16, nil) // no rows: nothing read
}

// dotsScaled (AVX2 where the CPU has it: four rows at a time, the rest
// one by one) and dotsScaledGo (where it has not) give the plain Go loop's
// float32 scores to the last bit, and
// the bits of the scores over the threshold, at every stride up to 160 and
// every row count from 0 to 13 (each remainder of four), at the extremes of
// int8 and int16, with scales of any size and sign and thresholds among the
// scores.
func TestDotsScaledMatchPlainGo(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for stride := 16; stride <= 160; stride += 16 {
		for rows := range 14 {
			q := make([]int16, stride)
			flat := make([]int8, rows*stride)
			scales := make([]float32, rows+1) // one past the rows: not read
			for i := range q {
				q[i] = int16(r.IntN(65535) - 32767)
			}
			for i := range flat {
				flat[i] = int8(r.IntN(255) - 127)
			}
			for i := range scales {
				scales[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.IntN(9)-4)))
			}
			if rows > 0 {
				flat[0], q[0] = -127, -32767
			}
			want, wantAbove := make([]float32, rows), make([]uint8, rows/4+1)
			for j := range want {
				var d [1]int32
				dotsI8Go(q, flat[j*stride:(j+1)*stride], stride, d[:])
				want[j] = float32(d[0]) * scales[j]
			}
			thrs := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), 0}
			if rows > 0 {
				thrs = append(thrs, want[r.IntN(rows)]) // equal: not above
			}
			for _, thr := range thrs {
				clear(wantAbove)
				for j, s := range want[:rows/4*4] {
					if s > thr {
						wantAbove[j/4] |= 1 << (j % 4)
					}
				}
				wantAbove[rows/4] = 0xff
				for name, dots := range map[string]func([]int16, []int8, int, []float32, float32, []float32, []uint8){"dotsScaled": dotsScaled, "dotsScaledGo": dotsScaledGo} {
					got, above := make([]float32, rows), make([]uint8, rows/4+1)
					above[rows/4] = 0xff // past the whole groups: left as it is
					dots(q, flat, stride, scales, thr, got, above)
					for j := range got {
						if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
							t.Fatalf("%s: stride %d, %d rows, row %d: %v, plain Go %v", name, stride, rows, j, got[j], want[j])
						}
					}
					if !slices.Equal(above, wantAbove) {
						t.Fatalf("%s: stride %d, %d rows, threshold %v: above %08b, want %08b", name, stride, rows, thr, above, wantAbove)
					}
				}
			}
		}
	}
}

// The int8 scan with exact rescoring finds what an exact float32 scan
// finds: on 20,000 GloVe sentence vectors (which sit close together, the
// hard case for quantization), for the search test queries and for 200
// corpus sentences, the best 10 and 50 are the exact best, scanned in one
// part or two.
// rescoreGo is vectors.rescore summed component by component in int64.
func rescoreGo(v *vectors, q16 []int16, qscale float32, i int) float32 {
	row, res := v.q8.row(i)[:v.dim], v.r8.row(i)
	var s, r int64
	for j := range row {
		s += int64(q16[j]) * int64(row[j])
		r += int64(q16[j]) * int64(res[j])
	}
	return float32((float64(s) + float64(r)/residualSteps) * float64(qscale) * float64(v.q8.scale(i)))
}

// Rescoring through dotsI8 gives the scores of summing every component
// one by one, to the last bit, at dimensions below, at and past a multiple
// of 16, for rows and queries of any sign and size.
func TestRescoreMatchesPlainGo(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for _, dim := range []int{3, 15, 16, 17, 50, 100, 112, 300} {
		var v vectors
		for i := range 200 {
			vec := make([]float32, dim)
			for j := range vec {
				vec[j] = float32(r.NormFloat64())
				if r.IntN(7) == 0 {
					vec[j] *= 40 // one large component: the others quantize coarsely
				}
			}
			v.put(rag.Chunk{ID: fmt.Sprint("r", i)}, rag.Normalize(vec), int64(i+1), 10, nil)
		}
		for range 20 {
			qv := make([]float32, dim)
			for j := range qv {
				qv[j] = float32(r.NormFloat64())
			}
			q16, qscale := queryI16(rag.Normalize(qv), v.stride)
			for i := range v.ids.len() {
				if got, want := v.rescore(q16, qscale, i), rescoreGo(&v, q16, qscale, i); got != want {
					t.Fatalf("dim %d row %d: rescored %g, component by component %g", dim, i, got, want)
				}
			}
		}
	}
}

func TestQuantizedScanRecall(t *testing.T) {
	t.Parallel()
	emb, err := glove.New()
	if err != nil {
		t.Fatal(err)
	}
	synth := benchcorpus.New(emb.Vocabulary(30_000), nil)
	synth.ParagraphWords = [2]int{30, 60} // sentences
	var v vectors
	var texts []string
	for i := range 20_000 {
		doc := synth.Doc("bench", i, 1)
		texts = append(texts, doc.Content)
	}
	vecs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, vec := range vecs {
		vecs[i] = rag.Normalize(vec)
		v.put(rag.Chunk{ID: texts[i][:min(20, len(texts[i]))] + string(rune(i))}, vecs[i], int64(i+1), 10, nil)
	}
	var queries []struct{ Query string }
	raw, _ := os.ReadFile("../../testdata/search/queries.json")
	if err := json.Unmarshal(raw, &queries); err != nil {
		t.Fatal(err)
	}
	var qs [][]float32
	for _, q := range queries {
		qs = append(qs, rag.Normalize(emb.EmbedOne(q.Query)))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		qs = append(qs, rag.Normalize(vecs[r.IntN(len(vecs))]))
	}
	exact := func(qv []float32, k int) []int {
		type s struct {
			i int
			d float32
		}
		all := make([]s, v.ids.len())
		for i := range v.ids.len() {
			all[i] = s{i, dot(qv, vecs[i])}
		}
		slices.SortFunc(all, func(a, b s) int { return -cmpF(a.d, b.d) })
		out := make([]int, k)
		for j := range out {
			out[j] = all[j].i
		}
		return out
	}
	missed, total := 0, 0
	for _, c := range []struct{ k, parts int }{{10, 1}, {50, 1}, {10, 2}, {50, 2}} {
		k := c.k
		for _, qv := range qs {
			want := exact(qv, k)
			q16, qscale := queryI16(qv, v.stride)
			var got []int
			for _, s := range v.nearest(qv, rag.Filter{}, k, c.parts, false) {
				got = append(got, s.i)
			}
			// A row tied with the k-th (the synthetic corpus repeats
			// texts) may be swapped for it: the rescoring (int8 row and
			// residual) is within 1e-4 of the exact score, not exact.
			kth := dot(qv, vecs[want[k-1]])
			for _, i := range want {
				total++
				if !slices.Contains(got, i) && dot(qv, vecs[i])-kth > 1e-4 {
					missed++
				}
				if d := v.rescore(q16, qscale, i) - dot(qv, vecs[i]); d > 1e-4 || d < -1e-4 {
					t.Fatalf("row %d rescored %g from the exact score", i, d)
				}
			}
		}
	}
	if missed > 0 {
		t.Fatalf("the int8 scan missed %d of the exact best %d (ties with the k-th aside)", missed, total)
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BenchmarkDots scores 100,000 rows of 100 dimensions (the GloVe default),
// the scan's inner loop: int8 rows with dotsI8, the same in plain Go, and
// float32 rows in plain Go (what the scan read before).
func BenchmarkDots(b *testing.B) {
	const rows, dim, stride = 100_000, 100, 112
	r := rand.New(rand.NewPCG(1, 2))
	flat, q := make([]float32, rows*dim), make([]float32, dim)
	q8 := make([]int8, rows*stride)
	for i := range flat {
		flat[i] = r.Float32()
	}
	for j := range rows {
		quantize(flat[j*dim:(j+1)*dim], q8[j*stride:(j+1)*stride], 127)
	}
	copy(q, flat)
	q16, _ := queryI16(q, stride)
	ints, floats := make([]int32, scanBlock), make([]float32, scanBlock)
	b.Run("int8", func(b *testing.B) {
		for b.Loop() {
			for start := 0; start < rows; start += scanBlock {
				n := min(scanBlock, rows-start)
				dotsI8(q16, q8[start*stride:(start+n)*stride], stride, ints[:n])
			}
		}
	})
	scales, above := make([]float32, rows), make([]uint8, scanBlock/4)
	for j := range scales {
		scales[j] = r.Float32()
	}
	b.Run("int8-scaled", func(b *testing.B) { // the scan's: four rows at a time, float32 scores
		for b.Loop() {
			for start := 0; start < rows; start += scanBlock {
				n := min(scanBlock, rows-start)
				dotsScaled(q16, q8[start*stride:(start+n)*stride], stride, scales[start:start+n], float32(math.Inf(1)), floats[:n], above)
			}
		}
	})
	b.Run("int8-plain-go", func(b *testing.B) {
		for b.Loop() {
			for start := 0; start < rows; start += scanBlock {
				n := min(scanBlock, rows-start)
				dotsI8Go(q16, q8[start*stride:(start+n)*stride], stride, ints[:n])
			}
		}
	})
	b.Run("float32-plain-go", func(b *testing.B) {
		for b.Loop() {
			for start := 0; start < rows; start += scanBlock {
				for j := range min(scanBlock, rows-start) {
					floats[j] = dot(q, flat[(start+j)*dim:(start+j+1)*dim])
				}
			}
		}
	})
}

// selectBest puts the k best scores first, whatever the order and ties.
func TestSelectBest(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		n := 1 + r.IntN(60)
		k := 1 + r.IntN(n)
		xs := make([]scored, n)
		for i := range xs {
			xs[i] = scored{i, float32(r.IntN(12))} // many ties
		}
		want := slices.Clone(xs)
		slices.SortFunc(want, func(a, b scored) int { return cmpF(b.score, a.score) })
		low := selectBest(xs, k)
		got := slices.Clone(xs[:k])
		slices.SortFunc(got, func(a, b scored) int { return cmpF(b.score, a.score) })
		for i := range got {
			if got[i].score != want[i].score {
				t.Fatalf("n %d k %d: best %v, want %v", n, k, got, want[:k])
			}
		}
		if low != want[k-1].score {
			t.Fatalf("n %d k %d: lowest kept %v, want %v", n, k, low, want[k-1].score)
		}
	}
}

// A document's chunks share one metadata entry (and the entries of its
// kinds one copy of its strings), and chunks
// naming the same refs one ref set; replacing or removing rows frees
// entries nobody uses, and each row still reads its own.
func TestRowsShareTheirMetadata(t *testing.T) {
	t.Parallel()
	var v vectors
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	doc := func(id, urn string, refs ...string) rag.Chunk {
		return rag.Chunk{ID: id, SourceURN: urn, SourceType: "JIRA", Kind: "comment", NodeKey: "node:" + urn, GraphRefs: refs, Timestamp: ts}
	}
	vec := []float32{1, 0, 0, 0}
	for i := range 5 {
		v.put(doc(fmt.Sprint("a", i), "urn:a", "issue:A-1"), vec, int64(i+1), 1, nil)
	}
	v.put(doc("b0", "urn:b", "issue:B-1"), vec, 6, 1, nil)
	v.put(doc("c0", "urn:a", "issue:A-1", "person:x"), vec, 7, 1, nil) // urn:a's, with refs of its own
	want := func(when string, docs, refs int) {
		t.Helper()
		if v.docMetas.live() != docs || v.refSets.live() != refs {
			t.Fatalf("%s: %d document entries and %d ref sets, want %d and %d", when, v.docMetas.live(), v.refSets.live(), docs, refs)
		}
	}
	want("at first", 2, 3)
	if m := v.meta(v.row("a3")); m.ID != "a3" || m.SourceURN != "urn:a" || m.NodeKey != "node:urn:a" || !m.Timestamp.Equal(ts) || !slices.Equal(m.GraphRefs, []string{"issue:A-1"}) {
		t.Fatalf("a3: %+v", m)
	}
	if m := v.meta(v.row("c0")); m.SourceURN != "urn:a" || !slices.Equal(m.GraphRefs, []string{"issue:A-1", "person:x"}) {
		t.Fatalf("c0: %+v", m)
	}
	// b0 moves to urn:a's metadata and refs: its entries are freed, then reused.
	v.put(doc("b0", "urn:a", "issue:A-1"), vec, 6, 1, nil)
	want("after b0 moved", 1, 2)
	if m := v.meta(v.row("b0")); m.SourceURN != "urn:a" || m.GraphRefs[0] != "issue:A-1" {
		t.Fatalf("b0 moved: %+v", m)
	}
	v.put(doc("d0", "urn:d"), vec, 8, 1, nil)
	want("after d0", 2, 3)
	if len(v.docMetas.list) != 2 || len(v.refSets.list) != 3 {
		t.Fatalf("freed entries are not reused: %d document entries, %d ref sets", len(v.docMetas.list), len(v.refSets.list))
	}
	for _, id := range []string{"a0", "a1", "a2", "a3", "a4", "b0"} {
		v.remove(id)
	}
	want("after removals", 2, 2)
	if m, d := v.meta(v.row("c0")), v.meta(v.row("d0")); m.GraphRefs[1] != "person:x" || m.SourceURN != "urn:a" || d.SourceURN != "urn:d" || len(d.GraphRefs) != 0 {
		t.Fatalf("after removals: c0 %+v, d0 %+v", m, d)
	}
	// Another kind of the same document: an entry of its own, the same
	// strings.
	other := doc("e0", strings.Clone("urn:a"), "issue:A-1")
	other.Kind, other.NodeKey = "attachment", strings.Clone(other.NodeKey)
	v.put(other, vec, 10, 1, nil)
	if e0, c0 := v.meta(v.row("e0")), v.meta(v.row("c0")); unsafe.StringData(e0.SourceURN) != unsafe.StringData(c0.SourceURN) ||
		unsafe.StringData(e0.NodeKey) != unsafe.StringData(c0.NodeKey) {
		t.Fatal("two entries of one document hold copies of its source URN and node key of their own")
	}
}

// row is chunk id's row (-1: none).
func (v *vectors) row(id string) int {
	if i, ok := v.ids.find(id); ok {
		return i
	}
	return -1
}

// Ref sets freed by rows that changed their refs leave their strings'
// numbers in the pool until they are half of it: it is then made again,
// and every row still reads its own refs.
func TestFreedRefSetsAreCompacted(t *testing.T) {
	t.Parallel()
	var v vectors
	vec := []float32{1, 0}
	refs := func(round, i int) []string {
		return []string{fmt.Sprintf("issue:R%d-%d", round, i), "person:p", fmt.Sprintf("topic:%d", i%7)}
	}
	const rows = 3000
	for round := range 4 {
		for i := range rows {
			v.put(rag.Chunk{ID: fmt.Sprint("c", i), SourceURN: "urn:x", GraphRefs: refs(round, i)}, vec, int64(i+1), 1, nil)
		}
		if live := 3 * v.refSets.live(); v.refWaste > minRefWaste && 2*v.refWaste > len(v.refPool) || len(v.refPool) > 2*live+minRefWaste {
			t.Fatalf("round %d: a pool of %d numbers, %d of freed sets, for %d in use", round, len(v.refPool), v.refWaste, live)
		}
		for _, i := range []int{0, 1234, rows - 1} {
			if got := v.meta(v.row(fmt.Sprint("c", i))).GraphRefs; !slices.Equal(got, refs(round, i)) {
				t.Fatalf("round %d: c%d's refs %v, want %v", round, i, got, refs(round, i))
			}
		}
	}
}
