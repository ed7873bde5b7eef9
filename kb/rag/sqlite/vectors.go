package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/strtab"
	"github.com/jervis-dev/jervis/kb/rag"
)

// vectors is one client's vectors in memory, flat for a fast scan, with
// what filters need. Each vector is kept quantized in int8 with one scale
// per row (rows padded to a multiple of 16), which a search scans — a
// quarter of float32's memory to read, which is what bounds the scan —,
// and with an int8 residual (what the int8 row leaves of each component,
// in 254ths of the scale), from which the best candidates are scored
// again: within about 1e-4 of the float32 dot product, as precise as an
// int16 copy at half its memory (the float32 vectors stay on disk).
//
// It also keeps, per chunk, its row id in the chunks table (the order of
// equal BM25 scores) and its token count (the length BM25 normalises by),
// so that BM25 is scored from the postings without a per-row lookup
// (bm25.go).
type vectors struct {
	// order is held by a write of this process from before its
	// transaction until its change is applied here, so that writes apply
	// in the order they committed: two writers that applied out of order
	// made the index stale, and the next search reloaded all of it (under
	// a bulk import, every search).
	order    sync.Mutex
	written  bool // under order: the client had chunks when a write of a resident store looked (residentFromStart)
	mu       sync.RWMutex
	gen      int64 // generation loaded; -1 = not loaded or stale
	dim      int
	ids      rowIDs // each row's chunk ID, and each ID's row
	seqs     []int64
	tokens   int64     // the rows' lengths summed (postings.docLen: counted as FTS5 counts)
	stride   int       // int8 row length: dim rounded up to 16
	q8       lists     // a row per chunk, stride wide, with its scale, in lists (ivf.go)
	r8       pages     // a row per chunk, dim wide: the residuals of q8 (residual)
	tmp8     []int8    // put's scratch row, under mu
	metaOf   []rowMeta // per row: its entries in docMetas and refSets
	docMetas shared[docMeta]
	refSets  shared[refSet]
	strs     strtab.Table // the strings docMetas and refPool name, by number
	refPool  []uint32     // the ref sets' strings, one set after another
	refWaste int          // how many of refPool's are of sets freed since
	postings              // BM25's inverted index (postings.go)

	// trainings counts the lists' trainings running aside (trainAside).
	trainings sync.WaitGroup
}

// shared is a table of values each kept once, counted by the rows using
// them: rows point into it by index. The chunk index keeps two: the
// metadata a document's chunks share (source, kind, node, time) and the
// chunks' graph refs (the document's node and the entities a chunk names,
// the same sets recurring); each held most of the index's strings when
// every row had its own copy.
type shared[T any] struct {
	list   []T
	users  []int32          // per entry: the rows using it (0: free)
	byHash map[uint64]int32 // an entry per hash of its value
	free   []int32
	hash   func(*T) uint64
	equal  func(a, b *T) bool
}

// add returns x's entry, counting one more row using it.
func (m *shared[T]) add(x T) int32 {
	h := m.hash(&x)
	if i, ok := m.byHash[h]; ok && m.equal(&m.list[i], &x) {
		m.users[i]++
		return i
	}
	if m.byHash == nil {
		m.byHash = map[uint64]int32{}
	}
	var i int32
	if n := len(m.free); n > 0 {
		i, m.free = m.free[n-1], m.free[:n-1]
		m.list[i], m.users[i] = x, 1
	} else {
		i = int32(len(m.list))
		m.list, m.users = append(m.list, x), append(m.users, 1)
	}
	if _, taken := m.byHash[h]; !taken { // a collision keeps the first
		m.byHash[h] = i
	}
	return i
}

// release counts one row less using entry i, freeing it when none does.
func (m *shared[T]) release(i int32) {
	if m.users[i]--; m.users[i] > 0 {
		return
	}
	if h := m.hash(&m.list[i]); m.byHash[h] == i {
		delete(m.byHash, h)
	}
	var zero T
	m.list[i] = zero
	m.free = append(m.free, i)
}

// live is how many entries are in use.
func (m *shared[T]) live() int { return len(m.list) - len(m.free) }

var metaSeed = maphash.MakeSeed()

// docMeta is what a document's chunks share: its strings (source, kind,
// node, the item's title) by their numbers in the index's strs, its time
// in microseconds (as the chunks table holds it). It holds no pointer,
// nor does the table of them. The title is here for searches that leave
// texts unread (rag.Query.NoText): each item of their pool is ranked by
// its title too.
type docMeta struct {
	sourceURN, sourceType, kind, nodeKey, title uint32
	ts                                          int64
}

// refSet is a set of graph refs: n string numbers at off in the index's
// refPool.
type refSet struct{ off, n uint32 }

func newDocMetas() shared[docMeta] {
	return shared[docMeta]{
		hash:  func(m *docMeta) uint64 { return maphash.Comparable(metaSeed, *m) },
		equal: func(a, b *docMeta) bool { return *a == *b },
	}
}

// resetMeta empties v's metadata tables (not metaOf, the rows' entries).
func (v *vectors) resetMeta() {
	v.strs, v.docMetas, v.refPool, v.refWaste = strtab.Table{}, newDocMetas(), nil, 0
	v.refSets = shared[refSet]{
		hash: func(s *refSet) uint64 {
			if s.n == 0 {
				return maphash.Comparable(metaSeed, 0)
			}
			ids := v.refPool[s.off : s.off+s.n]
			return maphash.Bytes(metaSeed, unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids)))
		},
		equal: func(a, b *refSet) bool {
			return slices.Equal(v.refPool[a.off:a.off+a.n], v.refPool[b.off:b.off+b.n])
		},
	}
}

// addMeta counts row metadata c in the shared tables and returns its
// entries: a document's chunks of each kind and time share an entry, and
// chunks naming the same graph refs a ref set. Their strings are kept in
// strs: the metadata of 583,000 chunks in a few objects without pointers,
// where their own strings (interned by package unique) and the ref sets'
// slices were 1.2 million of the heap's 2 million objects, which every
// collection marked while the searches it met waited.
func (v *vectors) addMeta(c rag.Chunk) (doc, refs int32) {
	if v.refSets.hash == nil {
		v.resetMeta()
	}
	doc = v.docMetas.add(docMeta{v.num(c.SourceURN), v.num(c.SourceType), v.num(c.Kind), v.num(c.NodeKey), v.num(c.Title), sqlitedb.Micros(c.Timestamp)})
	off := len(v.refPool)
	for _, r := range c.GraphRefs {
		v.refPool = append(v.refPool, v.num(r))
	}
	set := refSet{uint32(off), uint32(len(c.GraphRefs))}
	if refs = v.refSets.add(set); v.refSets.list[refs] != set { // a set held already
		v.refPool = v.refPool[:off]
	}
	return doc, refs
}

// num is s's number in strs.
func (v *vectors) num(s string) uint32 {
	n, _ := v.strs.Add(s)
	return n
}

func (v *vectors) releaseMeta(i int) {
	m := v.metaOf[i]
	v.docMetas.release(m.doc)
	n := v.refSets.list[m.refs].n
	if v.refSets.release(m.refs); v.refSets.users[m.refs] == 0 {
		v.refWaste += int(n)
		if v.refWaste > minRefWaste && 2*v.refWaste > len(v.refPool) {
			v.compactRefs()
		}
	}
}

// minRefWaste is how many numbers of freed ref sets refPool holds before
// it is compacted (when they are also half of it).
const minRefWaste = 1 << 12

// compactRefs copies the ref sets in use to a new refPool, leaving out
// the numbers of freed ones.
func (v *vectors) compactRefs() {
	pool := make([]uint32, 0, len(v.refPool)-v.refWaste)
	for i := range v.refSets.list {
		if v.refSets.users[i] == 0 {
			continue
		}
		s := &v.refSets.list[i]
		off := len(pool)
		pool = append(pool, v.refPool[s.off:s.off+s.n]...)
		s.off = uint32(off)
	}
	v.refPool, v.refWaste = pool, 0
}

// rowMeta is a row's entries in docMetas and refSets, side by side: a
// search reads both for every hit, at rows all over the index (two
// arrays cost a cache miss more per hit).
type rowMeta struct{ doc, refs int32 }

// meta returns row i's metadata (a chunk without Text and Vector).
func (v *vectors) meta(i int) rag.Chunk {
	c := v.chunkAt(i, v.ids.id(i))
	c.GraphRefs = v.refsOf(i, make([]string, 0, v.refCount(i)))
	return c
}

// chunkAt is row i's metadata but its graph refs (refsOf), with chunk ID
// id.
func (v *vectors) chunkAt(i int, id string) rag.Chunk {
	d := &v.docMetas.list[v.metaOf[i].doc]
	t := &v.strs
	return rag.Chunk{ID: id, Title: t.Str(d.title), SourceURN: t.Str(d.sourceURN), SourceType: t.Str(d.sourceType), Kind: t.Str(d.kind),
		NodeKey: t.Str(d.nodeKey), Timestamp: sqlitedb.Time(d.ts)}
}

// refCount is how many graph refs row i has.
func (v *vectors) refCount(i int) int { return int(v.refSets.list[v.metaOf[i].refs].n) }

// refsOf appends row i's graph refs to out.
func (v *vectors) refsOf(i int, out []string) []string {
	s := v.refSets.list[v.metaOf[i].refs]
	for _, n := range v.refPool[s.off : s.off+s.n] {
		out = append(out, v.strs.Str(n))
	}
	return out
}

// matches reports whether row i's chunk passes f.
func (v *vectors) matches(f rag.Filter, i int) bool {
	c := v.chunkAt(i, "")
	if len(f.NodeTypes) > 0 { // the only part of f that reads the refs
		var buf [16]string
		c.GraphRefs = v.refsOf(i, buf[:0])
	}
	return f.Matches(c)
}

// rescore is the dot product of the query — q16 scaled by qscale
// (queryI16) — with row i, from its int8 row and residual, in integers:
// within about 1e-4 of the float32 product. Both sums are dotsI8's (the
// residual's whole blocks of 16 there, its last dim%16 here): the sums fit
// in int32 (|q16| ≤ 32767, |row|, |residual| ≤ 127, 112 components: under
// 2^29) and are the same integers as summed one by one (rescoreGo, tested).
func (v *vectors) rescore(q16 []int16, qscale float32, i int) float32 {
	var row, res [1]int32
	dotsI8(q16, v.q8.row(i), v.stride, row[:]) // the padding is zeros on both sides
	r := v.r8.row(i)
	whole := v.dim / 16 * 16
	if whole > 0 {
		dotsI8(q16, r[:whole], whole, res[:])
	}
	rest := int64(res[0])
	for j := whole; j < v.dim; j++ {
		rest += int64(q16[j]) * int64(r[j])
	}
	return float32((float64(row[0]) + float64(rest)/residualSteps) * float64(qscale) * float64(v.q8.scale(i)))
}

// residualSteps is how many steps of a residual make one step of its
// int8 row (a residual is within half a step: ±127).
const residualSteps = 254

// residual writes into r what the int8 row q (of scale s, from quantize)
// leaves of each of vec's components, in 1/residualSteps of a step: q and
// r together hold vec within s/508 a component, an int16's precision.
func residual(vec []float32, q []int8, s float32, r []int8) {
	if s == 0 {
		clear(r)
		return
	}
	for j, x := range vec {
		e := math.Round(float64((x - float32(q[j])*s) / s * residualSteps))
		r[j] = int8(max(-127, min(127, e)))
	}
}

// quantize writes vec, scaled to ±top, into row (the rest of row, its
// padding, zero) and returns the scale that takes it back: the int8 rows
// (top 127) and queries in int16 (top 32767).
func quantize[T int8 | int16](vec []float32, row []T, top float32) float32 {
	var m float32
	for _, x := range vec {
		m = max(m, x, -x)
	}
	clear(row)
	if m == 0 {
		return 0
	}
	for i, x := range vec {
		row[i] = T(math.Round(float64(x / m * top)))
	}
	return m / top
}

// put adds or replaces a chunk. terms are its text's FTS5 tokens with their
// counts; nil keeps the postings it has (its text did not change).
func (v *vectors) put(c rag.Chunk, vec []float32, seq int64, length int32, terms map[string]float32) {
	if v.dim == 0 {
		v.dim = len(vec)
		v.stride = (v.dim + 15) / 16 * 16
		v.q8.stride, v.r8 = v.stride, newPages(v.dim) // q8 is empty (a load left its minRows)
		v.tmp8 = make([]int8, v.stride)
		if n := cap(v.seqs); n > 0 { // a load reserved room (reserve)
			v.q8.reserve(n)
			v.r8.reserve(n)
		}
	}
	doc, refs := v.addMeta(c)
	s := quantize(vec, v.tmp8, 127)
	if i, ok := v.ids.find(c.ID); ok {
		v.q8.set(i, v.tmp8, s)
		residual(vec, v.tmp8, s, v.r8.row(i))
		v.releaseMeta(i)
		v.metaOf[i] = rowMeta{doc, refs}
		if terms != nil { // else the same text: the same length
			v.tokens += int64(length - v.docLen[v.docs[i]])
			v.index(i, terms, length)
		}
		return
	}
	v.ids.add(c.ID)
	v.seqs = append(v.seqs, seq)
	v.tokens += int64(length)
	v.q8.push(v.tmp8, s)
	residual(vec, v.tmp8, s, v.r8.add())
	v.metaOf = append(v.metaOf, rowMeta{doc, refs})
	v.docs, v.nterms = append(v.docs, noDoc), append(v.nterms, 0)
	v.index(v.ids.len()-1, terms, length)
}

func (v *vectors) remove(id string) {
	i, ok := v.ids.find(id)
	if !ok {
		return
	}
	v.tokens -= int64(v.docLen[v.docs[i]])
	v.releaseMeta(i)
	v.unindex(i)
	v.ids.remove(i)
	v.q8.remove(i)
	last := len(v.seqs) - 1
	if i != last {
		v.seqs[i] = v.seqs[last]
		v.metaOf[i] = v.metaOf[last]
		v.docs[i], v.nterms[i] = v.docs[last], v.nterms[last]
		v.docRow[v.docs[i]] = int32(i)
		copy(v.r8.row(i), v.r8.row(last))
	}
	v.seqs = v.seqs[:last]
	v.metaOf = v.metaOf[:last]
	v.r8.truncate(last)
	v.docs, v.nterms = v.docs[:last], v.nterms[:last]
	v.compact()
}

// current returns the client's vectors, reloading them when another writer
// changed the client's chunks. The result is read-locked; call RUnlock.
func (x *index) current(ctx context.Context) (*vectors, error) {
	v := x.s.vectorsOf(x.client)
	gen, err := x.generation(ctx)
	if err != nil {
		return nil, err
	}
	v.mu.RLock()
	if v.gen == gen {
		return v, nil
	}
	v.mu.RUnlock()
	// A write of this process may have committed and not applied yet:
	// wait for it (vectors.order), and read the generation again. What
	// differs then was written by another process (or never loaded).
	v.order.Lock()
	defer v.order.Unlock()
	if gen, err = x.generation(ctx); err != nil {
		return nil, err
	}
	v.mu.Lock()
	if v.gen != gen {
		if err := x.load(ctx, v); err != nil {
			v.mu.Unlock()
			return nil, err
		}
	}
	v.mu.Unlock()
	v.mu.RLock()
	return v, nil
}

// generation reads the client's generation.
func (x *index) generation(ctx context.Context) (int64, error) {
	var gen int64
	err := x.s.db.QueryRow(ctx, `SELECT COALESCE((SELECT gen FROM generations WHERE client = ?), 0)`, x.client).Scan(&gen)
	if err != nil {
		return 0, x.s.db.Explain("vector generation", err)
	}
	return gen, nil
}

// loadBatch is how many rows a load tokenizes at once.
const loadBatch = 1024

// termCounts are a chunk's postings: its title's and text's tokens,
// weighed by column (columnWeights).
func termCounts(title, text []string) map[string]float32 {
	terms := make(map[string]float32, len(text))
	for _, t := range title {
		terms[t] += columnWeights[0]
	}
	for _, t := range text {
		terms[t] += columnWeights[1]
	}
	return terms
}

// reserve makes room for n rows in v, empty: a load counts its rows first,
// as slices grown row by row hold up to a quarter more than they use
// (the vectors' rows are the largest part of the index).
func (v *vectors) reserve(n int) {
	v.ids.reserve(n)
	v.seqs = make([]int64, 0, n)
	v.metaOf = make([]rowMeta, 0, n)
	v.docs, v.nterms, v.docRow, v.docLen = make([]uint32, 0, n), make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
}

// load reads the client's vectors in one transaction, so they match the
// generation read with them.
func (x *index) load(ctx context.Context, v *vectors) error {
	tx, err := x.s.db.R.BeginTx(ctx, nil)
	if err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	defer tx.Rollback()
	var gen int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT gen FROM generations WHERE client = ?), 0)`, x.client).Scan(&gen); err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM chunks WHERE client = ?`, x.client).Scan(&n); err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, graph_refs, source_urn, source_type, kind, node_key, ts, vector, title, text
		FROM chunks WHERE client = ?`, x.client)
	if err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	defer rows.Close()
	// not *v = ...: v.mu is held
	v.gen, v.dim, v.ids, v.seqs, v.tokens = -1, 0, rowIDs{}, nil, 0
	v.stride, v.q8, v.r8 = 0, lists{minRows: v.q8.minRows, common: v.q8.common, asideRows: v.q8.asideRows}, pages{}
	v.resetMeta()
	v.postings = postings{}
	v.reserve(n)
	// Rows are put a batch at a time with their postings and lengths:
	// their titles and texts tokenized as a write tokenizes them
	// (tokenizer.textTokens, FTS5's own tokens word by word). Reading the
	// postings of an FTS5 table instead (its 'instance' vocabulary, a row
	// per token) was 80 % of a load.
	type loaded struct {
		c           rag.Chunk
		vec         []float32
		seq         int64
		title, text string
	}
	var batch []loaded
	dim := 0
	flush := func() error {
		texts := make([]string, 0, 2*len(batch))
		for _, l := range batch {
			texts = append(texts, l.title, l.text)
		}
		tokens, err := x.s.tok.textTokens(ctx, texts)
		if err != nil {
			return fmt.Errorf("load postings: %w", err)
		}
		for j, l := range batch {
			title, text := tokens[2*j], tokens[2*j+1]
			v.put(l.c, l.vec, l.seq, int32(len(title)+len(text)), termCounts(title, text))
		}
		batch = batch[:0]
		return nil
	}
	for rows.Next() {
		var l loaded
		var ts int64
		var refs string
		var blob []byte
		if err := rows.Scan(&l.seq, &l.c.ID, &refs, &l.c.SourceURN, &l.c.SourceType, &l.c.Kind, &l.c.NodeKey, &ts, &blob, &l.title, &l.text); err != nil {
			return err
		}
		var err error
		if l.c.GraphRefs, err = sqlitedb.DecodeJSONList(refs); err != nil {
			return fmt.Errorf("chunk %s graph refs: %w", l.c.ID, err)
		}
		l.c.Timestamp, l.c.Title = sqlitedb.Time(ts), l.title
		l.vec = decode(blob)
		// Written before Upsert checked dimensions, a client's chunks may
		// hold vectors of two embedders: no index scans them as one.
		if dim == 0 {
			dim = len(l.vec)
		} else if len(l.vec) != dim {
			return fmt.Errorf("chunk %s vector: %d dimensions, the client's other chunks have %d (embedded by another model: reprocess the client with a wipe)", l.c.ID, len(l.vec), dim)
		}
		if batch = append(batch, l); len(batch) == loadBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	v.pack()
	v.retrain() // a large index is searched exactly until its lists are in
	v.gen = gen
	return nil
}

// retrain partitions the rows anew when they are due (lists.needsTraining),
// on a sample of kmeansSample vectors per list: at once under the write
// lock the caller holds for a small index (or one going back to a single
// list), else aside (trainAside) — after a write or a load, whose
// searches scan every row until the lists are in (at 583,209 chunks the
// training was 30–40 s of a load's 70–80). One training at a time; wait
// for it with v.trainings.
func (v *vectors) retrain() {
	ls := &v.q8
	if ls.aside != nil || !ls.needsTraining() {
		return
	}
	n := v.ids.len()
	sample := v.sample(kmeansSample * listsFor(n))
	if n < cmp.Or(ls.asideRows, trainAsideRows) || ls.tooFew(n) || len(sample) == 0 {
		ls.train(sample, defaultParts())
		return
	}
	t := &training{n: n, rewritten: ls.rewritten}
	ls.aside = t
	v.trainings.Add(1)
	go func() {
		defer v.trainings.Done()
		v.trainAside(t, sample, trainAsideBatch, nil)
	}()
}

// trainAside trains the lists on sample (taken at t.n rows) beside the
// index's writes and searches: the k-means on the sample alone, holding
// no lock; every row's list in batches of trainAsideBatch under the read
// lock (searches go on, a write waits for one batch); then, under the
// write lock, the rows written since their lists were worked out
// (t.dirty, and any added after) are assigned again and the rows moved
// into the new lists. A training the index no longer waits for — a load
// replaced its rows in between — is dropped. between, when not nil, is
// called with no lock held after the k-means, after each batch and, done,
// before the install (tests write there).
func (v *vectors) trainAside(t *training, sample [][]float32, batch int, between func(done bool)) {
	v.mu.RLock()
	stride, common, current := v.q8.stride, v.q8.common, v.q8.aside == t
	v.mu.RUnlock()
	if !current { // a load replaced the rows (and the lists) already
		return
	}
	p := newPartition(sample, min(listsFor(t.n), len(sample)), stride, common)
	var assigned []int32
	for {
		if between != nil {
			between(false)
		}
		v.mu.RLock()
		if v.q8.aside != t {
			v.mu.RUnlock()
			return
		}
		lo := len(assigned)
		hi := min(len(v.q8.listOf), lo+batch)
		if lo < hi {
			assigned = append(assigned, make([]int32, hi-lo)...)
			v.q8.assignRows(&p, lo, hi, 1, assigned)
		}
		v.mu.RUnlock()
		if lo >= hi {
			break
		}
	}
	if between != nil {
		between(true)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	ls := &v.q8
	if ls.aside != t {
		return
	}
	ls.aside = nil
	n := len(ls.listOf)
	if len(assigned) > n {
		assigned = assigned[:n]
	}
	lo := len(assigned)
	assigned = append(assigned, make([]int32, n-lo)...)
	ls.assignRows(&p, lo, n, 1, assigned)
	a := p.assigner()
	for _, i := range t.dirty {
		if int(i) < lo {
			assigned[i] = a.list(ls, int(i))
		}
	}
	ls.install(p, t.n, assigned, max(0, ls.rewritten-t.rewritten))
}

type scored struct {
	i     int
	score float32
}

// topK is a min-heap of the best k scores seen, typed (container/heap's
// interface calls were a tenth of a search).
type topK []scored

// offer keeps s if it is among the best k.
func (h *topK) offer(s scored, k int) {
	if len(*h) < k {
		*h = append(*h, s)
		h.up(len(*h) - 1)
	} else if s.score > (*h)[0].score {
		(*h)[0] = s
		h.down(0)
	}
}

func (h topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].score <= h[i].score {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h topK) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].score < h[l].score {
			m = r
		}
		if h[i].score <= h[m].score {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// sorted returns the kept scores, best first; equal scores in the order of
// their chunk IDs, as rag.Fuse orders them.
func (h topK) sorted(ids *rowIDs) []scored {
	out := slices.Clone(h)
	slices.SortFunc(out, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), ids.compare(a.i, b.i)) })
	return out
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// scanBlock is how many rows scan scores per call to dotsI8.
const scanBlock = 256

// rescored is how many candidates of the int8 scan are scored again
// exactly, for limit results, in all: enough that the int8 error (about 1%
// of a score) does not cost the exact best (TestQuantizedScanRecall: 8 per
// result up to 50 results). A long list (ranking items takes hundreds of
// passages) needs the same margin past its end, not eight times its length:
// rescoring was most of such a search.
func rescored(limit int) int { return max(160, limit+7*min(limit, 64)) }

// scan scores the rows of spans against q (q16: q as int16 at the int8
// rows' stride) from the int8 rows and keeps the best k that pass f. Scores are
// proportional to the dot product, not equal to it. Candidates above a
// threshold gather in a buffer; when it is full the best k are selected
// and the threshold rises to the k-th (cheaper than a heap when many
// candidates arrive in rising order). A block of rows is scored, scaled
// and compared with the threshold in one call (dotsScaled): this loop
// visits only the rows over it.
func (v *vectors) scan(q16 []int16, f rag.Filter, filtered bool, spans []span, k int) []scored {
	bp := scanBuffers.Get().(*[]scored)
	defer scanBuffers.Put(bp)
	if cap(*bp) < 4*k {
		*bp = make([]scored, 0, 4*k)
	}
	buf := (*bp)[: 0 : 4*k]
	thr := float32(math.Inf(-1))
	var block [scanBlock]float32
	var above [scanBlock / 4]uint8
	consider := func(j int, s float32) {
		if s <= thr || filtered && !v.matches(f, j) {
			return
		}
		buf = append(buf, scored{j, s})
		if len(buf) == cap(buf) {
			thr = selectBest(buf, k)
			buf = buf[:k]
		}
	}
	for _, sp := range spans {
		list := &v.q8.ls[sp.l]
		for start, end := sp.lo, 0; start < sp.hi; start = end {
			end = min(start+scanBlock, sp.hi, pageEnd(start))
			scores := block[:end-start]
			rows := list.rows[start:end]
			// The rows over the threshold at the block's start, by the
			// bits of above (a few in a block once the threshold has
			// risen); those of a last part-group of four checked one by
			// one.
			dotsScaled(q16, list.q8.span(start, end), v.stride, list.scales[start:end], thr, scores, above[:])
			groups := len(scores) / 4
			for g, m := range above[:groups] {
				for ; m != 0; m &= m - 1 {
					j := 4*g + bits.TrailingZeros8(m)
					consider(int(rows[j]), scores[j])
				}
			}
			for j := 4 * groups; j < len(scores); j++ {
				consider(int(rows[j]), scores[j])
			}
		}
	}
	if len(buf) > k {
		selectBest(buf, k)
		buf = buf[:k]
	}
	return slices.Clone(buf) // the buffer goes back to the pool
}

// scanBuffers are scan's candidate buffers, reused between searches.
var scanBuffers = sync.Pool{New: func() any { return new([]scored) }}

// selectBest reorders xs so that xs[:k] hold its k best scores (k <=
// len(xs)) and returns the lowest of them.
func selectBest(xs []scored, k int) float32 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		p := xs[lo+(hi-lo)/2].score
		i, j := lo, hi
		for i <= j {
			for xs[i].score > p {
				i++
			}
			for xs[j].score < p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i, j = i+1, j-1
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			lo = hi // xs[k-1] sits between the parts: done
		}
	}
	low := xs[0].score
	for _, x := range xs[:k] {
		low = min(low, x.score)
	}
	return low
}

// nearest returns the best limit rows for the unit vector qv that pass f:
// the int8 scan (in parts scans at once) of the lists probed (all of them
// when exact, and for a filtered search, whose rows may be few in the
// lists nearest the query) picks rescored(limit) candidates, their int8 rows and residuals
// score them again.
func (v *vectors) nearest(qv []float32, f rag.Filter, limit, parts int, exact bool) topK {
	filtered := f.Active()
	q16, qscale := queryI16(qv, v.stride)
	cands := max(rescored(limit)/parts, limit)
	spans, total := v.q8.probe(q16, filtered || exact, rescored(limit))
	if total < splitRows {
		parts = 1
		cands = rescored(limit)
	}
	groups := split(spans, total, parts)
	results := make([][]scored, parts)
	var wg sync.WaitGroup
	for p, g := range groups {
		wg.Go(func() { results[p] = v.scan(q16, f, filtered, g, cands) })
	}
	wg.Wait()
	// The candidates of every part, scored again exactly.
	var best topK
	for _, r := range results {
		for _, s := range r {
			s.score = v.rescore(q16, qscale, s.i)
			best.offer(s, limit)
		}
	}
	return best
}

// activeScans counts the vector scans running in this process.
var activeScans running

// running counts the searches of one kind (vector scans, BM25 queries)
// running in this process, so that one running alone over a large index
// splits its work across the CPUs, the others being idle, and one under
// load does not: the CPUs are busy anyway, and a split search waits for
// the later of its parts.
type running struct{ n atomic.Int32 }

// splitRows is how many rows an index needs before a search running alone
// splits.
const splitRows = 20_000

// enter counts a search in and returns how many parts it runs in: one per
// CPU (at most 8) when it runs alone over splitRows rows or more and may
// split, else one. leave counts it out.
func (r *running) enter(rows int, maySplit bool) int {
	if r.n.Add(1) == 1 && maySplit && rows >= splitRows {
		return min(runtime.GOMAXPROCS(0), 8)
	}
	return 1
}

func (r *running) leave() { r.n.Add(-1) }

// queryI16 scales the unit vector q to int16 at the given stride, and
// returns the scale that takes it back.
func queryI16(q []float32, stride int) ([]int16, float32) {
	out := make([]int16, stride)
	return out, quantize(q, out, 32767)
}

// NearVector implements rag.Index: a scan of every row below ivfMinRows
// rows (exact), of the lists nearest the query above (ivf.go), split
// across the CPUs for large indexes.
func (x *index) NearVector(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	return x.nearVectorOf(ctx, q, false)
}

// NearVectorExact implements rag.ExactVectorSearcher: NearVector scanning
// every row, whatever the lists.
func (x *index) NearVectorExact(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	return x.nearVectorOf(ctx, q, true)
}

func (x *index) nearVectorOf(ctx context.Context, q rag.Query, exact bool) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	if len(q.Vector) == 0 {
		return nil, nil
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	hits, err := v.nearVector(q, exact)
	seqs := v.complete(hits)
	v.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return x.withText(ctx, hits, seqs)
}

// nearVector scores without reading texts or metadata: the hits' chunks
// carry their IDs alone (complete). The caller holds v's read lock.
// exact scans every row (NearVectorExact).
func (v *vectors) nearVector(q rag.Query, exact bool) ([]rag.Hit, error) {
	if len(q.Vector) == 0 {
		return nil, nil
	}
	n := v.ids.len()
	if n == 0 {
		return nil, nil
	}
	if len(q.Vector) != v.dim {
		return nil, fmt.Errorf("%w: vector: %d dimensions, the index has %d", rag.ErrInvalid, len(q.Vector), v.dim)
	}
	parts := activeScans.enter(n, true)
	best := v.nearest(rag.Normalize(q.Vector), q.Filter, q.Limit, parts, exact).sorted(&v.ids)
	activeScans.leave()
	hits := getHits(len(best))
	for i, s := range best {
		hits[i] = rag.Hit{Chunk: rag.Chunk{ID: v.ids.id(s.i)}, Score: float64(s.score), VectorScore: float64(s.score)}
	}
	return hits, nil
}

// hitBuffers hold the slices a hybrid search's two sides return (400 and
// 80 hits of 208 bytes at the default limit: a sixth of what the HTTP
// benchmark's searches allocated at 100,000 chunks), reused once their
// fusion has copied the best out.
var hitBuffers sync.Pool

// getHits returns n hits, each to be set whole, from a reused slice when
// there is one; putHits gives a slice back that nothing refers to.
func getHits(n int) []rag.Hit {
	if p, _ := hitBuffers.Get().(*[]rag.Hit); p != nil && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]rag.Hit, n)
}

func putHits(hits []rag.Hit) {
	if cap(hits) > 0 {
		hitBuffers.Put(&hits)
	}
}

// complete reads the metadata of the hits scored here — their chunks carry
// their IDs alone, and no stored chunk lacks a source URN (rag.Chunk's
// validation) — from the rows their IDs are at, and returns their chunks'
// row ids for withText. A hybrid search completes only the hits that
// survive the fusion: of its 450 candidates, fewer than half at the
// default limit, and reading a hit's metadata is a few cache misses at
// rows all over the index. Complete hits (FTS5's, with their texts) are
// left as they are. The caller holds v's read lock, held since the hits
// were scored: their rows have not moved.
func (v *vectors) complete(hits []rag.Hit) map[string]int64 {
	seqs := make(map[string]int64, len(hits))
	rows := make([]int32, len(hits))
	n := 0
	for i, h := range hits {
		rows[i] = -1
		if h.Chunk.SourceURN != "" {
			continue
		}
		if r, ok := v.ids.find(h.Chunk.ID); ok {
			rows[i], n = int32(r), n+v.refCount(r)
		}
	}
	refs := make([]string, 0, n) // the hits' graph refs, one slice
	for i, r := range rows {
		if r < 0 {
			continue
		}
		h := &hits[i]
		at := len(refs)
		refs = v.refsOf(int(r), refs)
		h.Chunk, seqs[h.Chunk.ID] = v.chunkAt(int(r), h.Chunk.ID), v.seqs[r]
		h.Chunk.GraphRefs = refs[at:len(refs):len(refs)]
	}
	return seqs
}

// withText fills in the text of the hits that have none, whose chunks'
// row ids seqs gives, and leaves out those deleted since they were scored.
func (x *index) withText(ctx context.Context, hits []rag.Hit, seqs map[string]int64) ([]rag.Hit, error) {
	var want []int64
	for _, h := range hits {
		if seq, ok := seqs[h.Chunk.ID]; ok && h.Chunk.Text == "" {
			want = append(want, seq)
		}
	}
	if len(want) == 0 {
		return hits, nil
	}
	list, _ := json.Marshal(want)
	rows, err := x.s.db.Query(ctx, `SELECT seq, client, id, text, title FROM chunks WHERE seq IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, x.s.db.Explain("chunk text", err)
	}
	defer rows.Close()
	type row struct{ client, id, text, title string }
	found := make(map[int64]row, len(want))
	for rows.Next() {
		var seq int64
		var r row
		if err := rows.Scan(&seq, &r.client, &r.id, &r.text, &r.title); err != nil {
			return nil, err
		}
		found[seq] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := hits[:0]
	for _, h := range hits {
		if h.Chunk.Text != "" {
			out = append(out, h)
			continue
		}
		// A row id is reused once its chunk is deleted: it must still be
		// this client's chunk.
		if r, ok := found[seqs[h.Chunk.ID]]; ok && r.client == x.client && r.id == h.Chunk.ID {
			h.Chunk.Text, h.Chunk.Title = r.text, r.title
			out = append(out, h)
		}
	}
	return out, nil
}

// dotsScaledGo sets out[j] to float32(q · rows[j*stride:(j+1)*stride]) ×
// scales[j] — dotsI8Go's sums, converted and scaled — and, for each whole
// group g of four rows, bit b of above[g] when out[4g+b] > thr.
func dotsScaledGo(q []int16, rows []int8, stride int, scales []float32, thr float32, out []float32, above []uint8) {
	var d [1]int32
	for j := range out {
		dotsI8Go(q, rows[j*stride:(j+1)*stride], stride, d[:])
		out[j] = float32(d[0]) * scales[j]
	}
	for g := range len(out) / 4 {
		above[g] = 0
		for b, s := range out[4*g : 4*g+4] {
			if s > thr {
				above[g] |= 1 << b
			}
		}
	}
}

// dotsI8Go is dotsI8 in plain Go.
func dotsI8Go(q []int16, rows []int8, stride int, out []int32) {
	for j := range out {
		row := rows[j*stride : (j+1)*stride]
		var s int32
		for i, x := range row {
			s += int32(q[i]) * int32(x)
		}
		out[j] = s
	}
}

// Preload loads every client's in-memory index (vectors, postings, lengths)
// now rather than at its first search, which at 100,000 chunks takes
// seconds; report is told of each client as it is done. From then on a new
// client's index is loaded at its first write (the process searches).
func (s *Store) Preload(ctx context.Context, report func(client string, chunks int, took time.Duration)) error {
	s.resident.Store(true)
	clients, err := s.db.Strings(ctx, `SELECT client FROM generations ORDER BY client`)
	if err != nil {
		return s.db.Explain("preload", err)
	}
	for _, c := range clients {
		x, ok := s.For(c).(*index)
		if !ok || x.err != nil {
			continue
		}
		start := time.Now()
		v, err := x.current(ctx)
		if err != nil {
			return err
		}
		n := v.ids.len()
		v.mu.RUnlock()
		if report != nil {
			report(c, n, time.Since(start))
		}
	}
	return nil
}

// Settle waits for the vector lists' trainings running aside (every
// client's): a benchmark that measures searches does, so that it measures
// the lists and not an exact scan while they are made.
func (s *Store) Settle() {
	s.mu.Lock()
	vs := make([]*vectors, 0, len(s.indexes))
	for _, v := range s.indexes {
		vs = append(vs, v)
	}
	s.mu.Unlock()
	for _, v := range vs {
		v.trainings.Wait()
	}
}

// VectorCount implements rag.VectorSampler from the vectors in memory: once
// they are loaded, as they are, without asking the database whether
// another process wrote since (search asks that right after, for the
// search itself; a count one search behind serves the estimate).
func (x *index) VectorCount(ctx context.Context) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	v := x.s.vectorsOf(x.client)
	v.mu.RLock()
	loaded, n := v.gen >= 0, v.ids.len()
	v.mu.RUnlock()
	if loaded {
		return n, nil
	}
	v, err := x.current(ctx)
	if err != nil {
		return 0, err
	}
	defer v.mu.RUnlock()
	return v.ids.len(), nil
}

// SampleVectors implements rag.VectorSampler: the rows whose chunk IDs
// hash lowest (about n of them, whatever order the rows are in), in that
// order, each from its int8 row and residual.
func (x *index) SampleVectors(ctx context.Context, n int) ([][]float32, error) {
	if x.err != nil {
		return nil, x.err
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	defer v.mu.RUnlock()
	return v.sample(n), nil
}

func (v *vectors) sample(n int) [][]float32 {
	rows := v.ids.len()
	if n <= 0 || rows == 0 {
		return nil
	}
	type pick struct {
		h uint64
		i int
	}
	picks := make([]pick, 0, min(rows, 2*n))
	// Rows are kept when their hash is under a bound that lets about 2n
	// through; the n lowest of them are the sample.
	bound := uint64(math.MaxUint64)
	if rows > 2*n {
		bound = uint64(float64(math.MaxUint64) / float64(rows) * float64(2*n))
	}
	for i := range rows {
		if h := v.ids.hash(i); h <= bound {
			picks = append(picks, pick{h, i})
		}
	}
	slices.SortFunc(picks, func(a, b pick) int {
		return cmp.Or(cmp.Compare(a.h, b.h), v.ids.compare(a.i, b.i))
	})
	picks = picks[:min(n, len(picks))]
	out := make([][]float32, len(picks))
	for k, p := range picks {
		out[k] = v.vector(p.i)
	}
	return out
}

// vector is row i's vector, from its int8 row and residual.
func (v *vectors) vector(i int) []float32 {
	row, res := v.q8.row(i)[:v.dim], v.r8.row(i)
	out := make([]float32, v.dim)
	for j := range out {
		out[j] = (float32(row[j]) + float32(res[j])/residualSteps) * v.q8.scale(i)
	}
	return out
}
