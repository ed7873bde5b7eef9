package sqlite

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/jervis-dev/jervis/kb/rag"
)

// lists holds the int8 rows of the vectors, each with its scale, in lists
// (an inverted file, FAISS's IndexIVFFlat): one list while the index is
// small, and once it holds ivfMinRows rows, one list per centroid of a
// k-means of its vectors (in the queries' space: querySpace), each row in
// the list of the centroid nearest it. A vector search then scans the
// lists of the centroids nearest the query (probe), a tenth of the rows,
// instead of all of them: at 583,000 chunks the exhaustive scan was a
// quarter of a search's CPU.
//
// A list keeps its rows contiguous, so a list is scanned as the whole
// index was (dotsScaled over spans of pages); rows move between lists
// (an update, a removal, a new training), never between row numbers
// other than as vectors.remove moves them.
type lists struct {
	minRows int // rows from which the index is partitioned: ivfMinRows unless set (Store.SetVectorLists)
	// common is how many dominant directions of the vectors search takes
	// out of a query (Store.SetCommonComponents): the partition is then
	// made in the queries' space (querySpace), with dirs, estimated at
	// each training.
	common int
	partition
	ls     []rowList
	listOf []int32 // per row: its list
	posOf  []int32 // per row: its place in its list

	trainedAt int // rows the centroids were trained on (0 before)
	// rewritten counts the rows whose vectors were replaced since the
	// centroids were trained: once they are half of trainedAt the lists
	// are trained again (needsTraining), so that a client's vectors all
	// made again — its documents replayed with another encoder — are not
	// left in the lists of the vectors they replaced.
	rewritten int
	// aside is the training running beside writes and searches
	// (trainAside), nil when none is; asideRows the rows from which
	// trainings run aside (trainAsideRows unless set, by tests).
	aside     *training
	asideRows int

	near *assigner // nearest's, under the vectors' write lock (nil: not yet made for this partition)
}

// partition is what a training makes: the centroids (unit vectors in
// int8, stride each, with their scales; nil before the first) and the
// dominant directions rows are seen without (querySpace; none unless
// lists.common).
type partition struct {
	stride  int
	dirs    [][]float64
	cents   []int8
	cscales []float32
}

// rowList is one list: its rows' int8 copies and scales, contiguous, and
// the row each entry is.
type rowList struct {
	q8     pages
	scales []float32
	rows   []int32
}

// ivfMinRows is how many rows an index needs before it is partitioned
// when lists.minRows is not set (Store.SetVectorLists, 0): never. The
// configuration's rag.sqlite.vector_lists sets 100,000 unless told
// otherwise (config.DefaultVectorLists): the lists halve a search's
// retrieve stage at 583,000 chunks, and since their trainings run aside
// (vectors.trainAside) the import there keeps its speed and freshness
// (under the write lock they cost it a tenth of its speed, freshness p99
// 274 → 465 ms; BENCHMARKS.md, eighteenth and twentieth rounds).
// Partitioned in the queries' space (querySpace), 2√n lists, with the
// floor at 10,000 on the dev Jira corpus (jervis eval, Jira + Git), the
// default search's recall@10 / MRR@10 is the exact scan's, 0.669 / 0.436,
// and the vectors alone 0.216 / 0.126 against 0.230 / 0.133 (the raw
// vectors' partition, √n/2 lists: 0.662 / 0.424 and 0.162 / 0.097;
// BENCHMARKS.md, seventeenth and eighteenth rounds).
const ivfMinRows = math.MaxInt32

// row is row i's int8 copy, stride long.
func (ls *lists) row(i int) []int8 { return ls.ls[ls.listOf[i]].q8.row(int(ls.posOf[i])) }

// scale is the scale of row i's int8 copy.
func (ls *lists) scale(i int) float32 { return ls.ls[ls.listOf[i]].scales[ls.posOf[i]] }

// reserve makes room for n rows in the first list (a load, before any
// training, puts every row there).
func (ls *lists) reserve(n int) {
	ls.listOf, ls.posOf = make([]int32, 0, n), make([]int32, 0, n)
	if len(ls.ls) == 0 {
		ls.ls = []rowList{{q8: newPages(ls.stride)}}
	}
	l := &ls.ls[0]
	l.q8.reserve(n)
	l.scales, l.rows = make([]float32, 0, n), make([]int32, 0, n)
}

// push adds row len() — row, of scale s — to the list of its nearest
// centroid.
func (ls *lists) push(row []int8, s float32) {
	i := len(ls.listOf)
	ls.listOf, ls.posOf = append(ls.listOf, 0), append(ls.posOf, 0)
	ls.place(i, ls.nearest(row, s), row, s)
	ls.written(i)
}

// set replaces row i with row, of scale s, moving it to another list when
// its nearest centroid changed.
func (ls *lists) set(i int, row []int8, s float32) {
	ls.written(i)
	if ls.cents != nil && (ls.scale(i) != s || !slices.Equal(ls.row(i), row)) {
		ls.rewritten++ // a vector made again, not the same one written again
	}
	l := ls.nearest(row, s)
	if l != ls.listOf[i] {
		ls.drop(i)
		ls.place(i, l, row, s)
		return
	}
	copy(ls.row(i), row)
	ls.ls[l].scales[ls.posOf[i]] = s
}

// remove takes row i out, and gives its number to the last row, as
// vectors.remove does with every per-row slice.
func (ls *lists) remove(i int) {
	ls.drop(i)
	last := len(ls.listOf) - 1
	if i != last {
		ls.listOf[i], ls.posOf[i] = ls.listOf[last], ls.posOf[last]
		ls.ls[ls.listOf[i]].rows[ls.posOf[i]] = int32(i)
		ls.written(i)
	}
	ls.listOf, ls.posOf = ls.listOf[:last], ls.posOf[:last]
}

// place appends row i to list l.
func (ls *lists) place(i int, l int32, row []int8, s float32) {
	if len(ls.ls) == 0 {
		ls.ls = []rowList{{q8: newPages(ls.stride)}}
	}
	list := &ls.ls[l]
	copy(list.q8.add(), row)
	list.scales = append(list.scales, s)
	list.rows = append(list.rows, int32(i))
	ls.listOf[i], ls.posOf[i] = l, int32(len(list.rows)-1)
}

// drop takes row i out of its list, the list's last entry taking its
// place; the row's own listOf and posOf are left for the caller.
func (ls *lists) drop(i int) {
	list := &ls.ls[ls.listOf[i]]
	p, last := int(ls.posOf[i]), len(list.rows)-1
	if p != last {
		copy(list.q8.row(p), list.q8.row(last))
		list.scales[p], list.rows[p] = list.scales[last], list.rows[last]
		ls.posOf[list.rows[p]] = int32(p)
	}
	list.q8.truncate(last)
	list.scales, list.rows = list.scales[:last], list.rows[:last]
}

// nearest is the list of the centroid nearest row, of scale s (0
// untrained).
func (ls *lists) nearest(row []int8, s float32) int32 {
	if ls.cents == nil {
		return 0
	}
	if ls.near == nil {
		ls.near = ls.partition.assigner()
	}
	return ls.near.of(row, s)
}

// inQuerySpace is row (of scale s) as the partition sees it: itself, or
// with dirs it is querySpace's image, in tmp8 (vec and tmp8 are scratch,
// stride long).
func (p *partition) inQuerySpace(row []int8, s float32, vec []float32, tmp8 []int8) []int8 {
	if len(p.dirs) == 0 {
		return row
	}
	for j, x := range row {
		vec[j] = float32(x) * s
	}
	querySpace(vec[:len(p.dirs[0])], p.dirs)
	quantize(vec[:len(p.dirs[0])], tmp8, 127)
	return tmp8
}

// querySpace maps the unit vector v, in place, to where a partition for
// queries free of the directions dirs (orthonormal) should see it: its part
// off dirs kept, its part along them folded onto the first, the length of
// that part kept. A query q free of dirs scores it as it scores v (q·v'
// = q·v), so the centroids rank the lists for q as before; but rows no
// longer fall apart by where they point along dirs — what every text of a
// corpus shares, and what the queries ignore —, and a row's part off dirs
// keeps its length, by which it can beat rows nearer the query's
// direction (a maximum inner product search: Bachrach et al., 2014). On
// 583,209 chunks (√n/2 lists, a tenth of the rows scanned) the lists found
// 0.883 of an exact scan's best 80 for search's queries, against 0.807
// with the raw vectors and 0.695 with their parts off dirs normalized.
func querySpace(v []float32, dirs [][]float64) {
	along := 0.0
	for _, u := range dirs {
		p := 0.0
		for j, uj := range u {
			p += uj * float64(v[j])
		}
		along += p * p
		for j, uj := range u {
			v[j] -= float32(p * uj)
		}
	}
	along = math.Sqrt(along)
	for j, uj := range dirs[0] {
		v[j] += float32(along * uj)
	}
}

// assign is the centroid nearest row, with row16 and out as scratch
// (stride and one per centroid long): the centroid of the highest dot
// product, row widened to int16 against the int8 centroids.
func (p *partition) assign(row []int8, row16 []int16, out []int32) int32 {
	for j, x := range row {
		row16[j] = int16(x)
	}
	dotsI8(row16, p.cents, p.stride, out)
	best, top := int32(0), float32(math.Inf(-1))
	for c, d := range out {
		if s := float32(d) * p.cscales[c]; s > top {
			best, top = int32(c), s
		}
	}
	return best
}

// needsTraining says whether the lists are due for (new) centroids: the
// index reached ivfMinRows rows, or doubled since they were trained, or
// fell under half of ivfMinRows (one list again).
func (ls *lists) needsTraining() bool {
	n := len(ls.listOf)
	if ls.cents == nil {
		return n >= cmp.Or(ls.minRows, ivfMinRows)
	}
	return n >= 2*ls.trainedAt || ls.tooFew(n) || 2*ls.rewritten >= ls.trainedAt
}

// tooFew reports whether n rows are too few for lists: under half the
// rows an index needs before it is partitioned (one that shrank below it
// goes back to one list).
func (ls *lists) tooFew(n int) bool { return n < cmp.Or(ls.minRows, ivfMinRows)/2 }

// listsFor is how many lists an index of n rows is partitioned into:
// about 2√n, so that a list holds about √n/2 rows (380 at 583,000) and
// the centroids, scored for every query, cost little beside the lists
// probed (1,527 of 112 bytes there). Finer lists find more of the exact
// best for the same share of rows: at 583,209 chunks, a tenth of the rows
// scanned, 0.844 of the exact best 80 with √n/4 lists, 0.883 with √n/2,
// 0.907 with √n, 0.924 with 2√n; training them took 33.9, 37.7, 36.4 and
// 43.3 s of a load (its k-means and assignment grow with the lists).
func listsFor(n int) int { return max(16, int(2*math.Sqrt(float64(n)))) }

// kmeansIterations is how many rounds of Lloyd's algorithm train the
// centroids, and kmeansSample how many points per centroid it trains on.
const (
	kmeansIterations = 10
	kmeansSample     = 32
)

// train partitions the rows anew, at once: centroids from a k-means of
// sample (the rows' vectors, a deterministic sample: vectors.sample),
// then every row in its nearest centroid's list, with parts goroutines
// assigning. Under half of ivfMinRows rows it goes back to one list.
func (ls *lists) train(sample [][]float32, parts int) {
	n := len(ls.listOf)
	if ls.tooFew(n) || len(sample) == 0 {
		ls.partition, ls.trainedAt, ls.near, ls.rewritten = partition{stride: ls.stride}, 0, nil, 0
		ls.relayout(nil, 1)
		return
	}
	p := newPartition(sample, min(listsFor(n), len(sample)), ls.stride, ls.common)
	assigned := make([]int32, n)
	ls.assignRows(&p, 0, n, parts, assigned)
	ls.install(p, n, assigned, 0)
}

// newPartition trains k centroids on sample (the rows' vectors), by
// k-means — spherical, as rows are compared by dot product —, in the
// queries' space when common directions are taken out of queries (the
// directions estimated from the sample). It reads nothing but sample.
func newPartition(sample [][]float32, k, stride, common int) partition {
	p := partition{stride: stride}
	if common > 0 {
		p.dirs = rag.DominantDirections(sample, len(sample[0]), common)
	}
	if len(p.dirs) > 0 {
		mapped := make([][]float32, len(sample))
		for i, v := range sample {
			mapped[i] = slices.Clone(v)
			querySpace(mapped[i], p.dirs)
		}
		sample = mapped
	}
	p.cents, p.cscales = kmeans(sample, k, stride)
	return p
}

// assignRows sets assigned[i] to the list p puts row i in, for rows [lo,
// hi), with parts goroutines.
func (ls *lists) assignRows(p *partition, lo, hi, parts int, assigned []int32) {
	var wg sync.WaitGroup
	for part := range parts {
		wg.Go(func() {
			a := p.assigner()
			for i := lo + part*(hi-lo)/parts; i < lo+(part+1)*(hi-lo)/parts; i++ {
				assigned[i] = a.list(ls, i)
			}
		})
	}
	wg.Wait()
}

// assigner puts rows in p's lists, with its own scratch.
type assigner struct {
	p     *partition
	row16 []int16
	out   []int32
	vec   []float32
	tmp8  []int8
}

// assigner returns an assigner to p's lists with scratch of its own.
func (p *partition) assigner() *assigner {
	return &assigner{p: p, row16: make([]int16, p.stride), out: make([]int32, len(p.cscales)),
		vec: make([]float32, p.stride), tmp8: make([]int8, p.stride)}
}

// of is the list of p that row (of scale s) goes in.
func (a *assigner) of(row []int8, s float32) int32 {
	return a.p.assign(a.p.inQuerySpace(row, s, a.vec, a.tmp8), a.row16, a.out)
}

// list is the list of p that row i of ls goes in.
func (a *assigner) list(ls *lists, i int) int32 { return a.of(ls.row(i), ls.scale(i)) }

// install makes p the partition, trained on n rows, every row moved to
// its list in assigned; rewritten rows were replaced after its sample was
// taken.
func (ls *lists) install(p partition, n int, assigned []int32, rewritten int) {
	ls.partition, ls.trainedAt, ls.near, ls.rewritten = p, n, nil, rewritten
	ls.relayout(assigned, len(p.cscales))
}

// training is a training running aside: the rows it was asked at, and
// the rows written since (added, replaced, or given another row's
// number by a removal), whose lists it works out again when it installs.
type training struct {
	n     int
	dirty []int32
	// rewritten is lists.rewritten when its sample was taken.
	rewritten int
}

// trainAsideRows is how many rows an index holds before its trainings
// run aside (vectors.trainAside) instead of under the write lock: under
// it a training costs little (at 20,000 rows, 282 lists, 0.35 s on this
// project's 2-core machine), above it writes and searches would wait for
// the whole of it (2.3 s at 100,000 rows; the k-means grows as n^1.5).
const trainAsideRows = 20000

// trainAsideBatch is how many rows a training aside assigns under one
// read lock: a write waits at most for that many (against 282 lists 8
// ms, against 1,264 — 400,000 rows — 43 ms on the same machine).
const trainAsideBatch = 2048

// written notes that row i was added, replaced or renumbered while a
// training runs aside.
func (ls *lists) written(i int) {
	if ls.aside != nil {
		ls.aside.dirty = append(ls.aside.dirty, int32(i))
	}
}

// relayout moves every row to list assigned[i] (0 when assigned is nil)
// of k, each list allocated at its size. The old lists are read in order
// and each page let go of once read, so that the rows are held twice only
// a page at a time, not all of them (65 MB at 583,000 chunks).
func (ls *lists) relayout(assigned []int32, k int) {
	to := func(i int32) int32 {
		if assigned == nil {
			return 0
		}
		return assigned[i]
	}
	sizes := make([]int, k)
	for i := range ls.listOf {
		sizes[to(int32(i))]++
	}
	next := make([]rowList, k)
	for l := range next {
		next[l] = rowList{q8: newPages(ls.stride), scales: make([]float32, 0, sizes[l]), rows: make([]int32, 0, sizes[l])}
		next[l].q8.reserve(sizes[l])
	}
	for l := range ls.ls {
		old := &ls.ls[l]
		for p, i := range old.rows {
			list := &next[to(i)]
			copy(list.q8.add(), old.q8.row(p))
			list.scales = append(list.scales, old.scales[p])
			list.rows = append(list.rows, i)
			if (p+1)%pageRows == 0 || p+1 == len(old.rows) {
				old.q8.list[p/pageRows] = nil // read: the collector may take it
			}
		}
		*old = rowList{}
	}
	for l := range next {
		for p, i := range next[l].rows {
			ls.listOf[i], ls.posOf[i] = int32(l), int32(p)
		}
	}
	ls.ls = next
}

// kmeans returns k centroids of points (unit vectors) by Lloyd's
// algorithm on the sphere — each round every point to the centroid of the
// highest dot product, each centroid the normalized mean of its points —,
// in int8 at the given stride with their scales. It starts from k points
// spread over the sample (the sample is in hash order: no pattern), and a
// centroid left without points takes the point farthest from its own.
func kmeans(points [][]float32, k, stride int) ([]int8, []float32) {
	dim := len(points[0])
	p16 := make([][]int16, len(points))
	for i, p := range points {
		p16[i], _ = queryI16(p, stride)
	}
	cents := make([][]float32, k)
	for c := range cents {
		cents[c] = slices.Clone(points[c*len(points)/k])
	}
	c8, cs := make([]int8, k*stride), make([]float32, k)
	quantizeAll := func() {
		for c, v := range cents {
			cs[c] = quantize(v, c8[c*stride:(c+1)*stride], 127)
		}
	}
	assigned, best := make([]int32, len(points)), make([]float32, len(points))
	out := make([]int32, k)
	for range kmeansIterations {
		quantizeAll()
		for i, q := range p16 {
			dotsI8(q, c8, stride, out)
			assigned[i], best[i] = 0, float32(math.Inf(-1))
			for c, d := range out {
				if s := float32(d) * cs[c]; s > best[i] {
					assigned[i], best[i] = int32(c), s
				}
			}
		}
		counts := make([]int, k)
		for c := range cents {
			clear(cents[c])
		}
		for i, p := range points {
			c := cents[assigned[i]]
			counts[assigned[i]]++
			for j, x := range p {
				c[j] += x
			}
		}
		for c := range cents {
			if counts[c] == 0 {
				far := 0
				for i := range best {
					if best[i] < best[far] {
						far = i
					}
				}
				best[far] = float32(math.Inf(1)) // not taken twice
				copy(cents[c], points[far])
				continue
			}
			normalize(cents[c][:dim])
		}
	}
	quantizeAll()
	return c8, cs
}

// normalize scales v to unit length in place (a zero vector stays zero).
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for j := range v {
		v[j] *= inv
	}
}

// span is positions [lo, hi) of list l.
type span struct {
	l      int32
	lo, hi int
}

// probeShare is the share of an index's rows a vector search scans, at
// the least: the lists of the centroids nearest the query until they hold
// that many rows (and at least probeMinLists lists, and twice the
// candidates asked). On the 583,000 chunks of bench --synthetic 100000
// (GloVe's vectors, 1,527 lists in the queries' space) search's own
// queries — four common directions taken out (kb.queryVector) — find
// 0.89 of an exact scan's best 80 in a tenth of its time (381 lists of the
// raw vectors: 0.75, a fifth of the rows 0.81, three tenths 0.84;
// BENCHMARKS.md, seventeenth and eighteenth rounds).
const (
	probeShare    = 0.10
	probeMinLists = 8
)

// probe returns the spans a search for q16 scans, whole lists, and how many
// rows they hold: every list when untrained or exhaustive, else the lists
// nearest q16 by their centroids.
func (ls *lists) probe(q16 []int16, exhaustive bool, cands int) ([]span, int) {
	var spans []span
	if ls.cents == nil || exhaustive {
		total := 0
		for l := range ls.ls {
			if n := len(ls.ls[l].rows); n > 0 {
				spans = append(spans, span{int32(l), 0, n})
				total += n
			}
		}
		return spans, total
	}
	k := len(ls.cscales)
	out := make([]int32, k)
	dotsI8(q16, ls.cents, ls.stride, out)
	// The lists by their centroid's score, best first: each list's score
	// made an unsigned key that sorts the other way, its number below it
	// (a plain sort of integers, no comparisons called: a fifth of the
	// probe's time with the scores compared through a function).
	order := make([]uint64, k)
	for c := range order {
		order[c] = uint64(descending(float32(out[c])*ls.cscales[c]))<<32 | uint64(c)
	}
	slices.Sort(order)
	want := max(int(probeShare*float64(len(ls.listOf))), 2*cands)
	total := 0
	for j, key := range order {
		c := int32(uint32(key))
		if j >= probeMinLists && total >= want {
			break
		}
		if n := len(ls.ls[c].rows); n > 0 {
			spans = append(spans, span{c, 0, n})
			total += n
		}
	}
	return spans, total
}

// descending maps a score to an unsigned key that orders scores from the
// highest: the float's bits made to sort as unsigned integers (sign bit
// flipped for positives, every bit for negatives), then inverted.
func descending(f float32) uint32 {
	b := math.Float32bits(f)
	if b&(1<<31) != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return ^b
}

// split divides spans, holding total rows, into parts groups of about
// equal rows, cutting a span where a group ends.
func split(spans []span, total, parts int) [][]span {
	groups := make([][]span, parts)
	g, room := 0, total/parts+1
	if parts == 1 {
		room = total
	}
	for _, s := range spans {
		for s.lo < s.hi {
			take := min(s.hi-s.lo, room)
			groups[g] = append(groups[g], span{s.l, s.lo, s.lo + take})
			s.lo += take
			if room -= take; room == 0 {
				g++
				room = total/parts + 1
				if g == parts-1 {
					room = total // the last takes the rest
				}
			}
		}
	}
	return groups
}

// defaultParts is how many goroutines train's assignment runs on.
func defaultParts() int { return min(runtime.GOMAXPROCS(0), 8) }
