package sqlite

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// vectors is one client's vectors in memory, flat for a fast exact scan,
// with what filters need.
//
// It also keeps, per chunk, its FTS5 row id and token count (the length
// BM25 normalises by), so that BM25 can be scored from the FTS5 postings
// without a per-row lookup (bm25.go).
type vectors struct {
	mu     sync.RWMutex
	gen    int64 // generation loaded; -1 = not loaded or stale
	dim    int
	pos    map[string]int
	bySeq  map[int64]int
	ids    []string
	seqs   []int64
	lens   []int32 // tokens per chunk, as FTS5 counts them
	tokens int64   // sum of lens
	flat   []float32
	meta   []rag.Chunk // without Text and Vector
}

func (v *vectors) put(c rag.Chunk, vec []float32, seq int64, length int32) {
	if v.pos == nil {
		v.pos, v.bySeq = map[string]int{}, map[int64]int{}
	}
	if v.dim == 0 {
		v.dim = len(vec)
	}
	m := c
	m.Text, m.Vector = "", nil
	if i, ok := v.pos[c.ID]; ok {
		copy(v.flat[i*v.dim:], vec)
		v.meta[i] = m
		v.tokens += int64(length - v.lens[i])
		v.lens[i] = length
		return
	}
	v.pos[c.ID], v.bySeq[seq] = len(v.ids), len(v.ids)
	v.ids, v.seqs, v.lens = append(v.ids, c.ID), append(v.seqs, seq), append(v.lens, length)
	v.tokens += int64(length)
	v.flat = append(v.flat, vec...)
	v.meta = append(v.meta, m)
}

func (v *vectors) remove(id string) {
	i, ok := v.pos[id]
	if !ok {
		return
	}
	v.tokens -= int64(v.lens[i])
	delete(v.pos, id)
	delete(v.bySeq, v.seqs[i])
	last := len(v.ids) - 1
	if i != last {
		v.ids[i], v.seqs[i], v.lens[i], v.meta[i] = v.ids[last], v.seqs[last], v.lens[last], v.meta[last]
		copy(v.flat[i*v.dim:(i+1)*v.dim], v.flat[last*v.dim:])
		v.pos[v.ids[i]], v.bySeq[v.seqs[i]] = i, i
	}
	v.ids, v.seqs, v.lens, v.meta, v.flat = v.ids[:last], v.seqs[:last], v.lens[:last], v.meta[:last], v.flat[:last*v.dim]
}

// current returns the client's vectors, reloading them when another writer
// changed the client's chunks. The result is read-locked; call RUnlock.
func (x *index) current(ctx context.Context) (*vectors, error) {
	if err := x.ensureFTS(ctx); err != nil { // load reads its sizes
		return nil, err
	}
	v := x.s.vectorsOf(x.client)
	var gen int64
	err := x.s.db.R.QueryRowContext(ctx, `SELECT COALESCE((SELECT gen FROM generations WHERE client = ?), 0)`, x.client).Scan(&gen)
	if err != nil {
		return nil, x.s.db.Explain("vector generation", err)
	}
	v.mu.RLock()
	if v.gen == gen {
		return v, nil
	}
	v.mu.RUnlock()
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
	rows, err := tx.QueryContext(ctx, `SELECT c.seq, c.id, c.graph_refs, c.source_urn, c.source_type, c.kind, c.node_key, c.ts, c.vector, d.sz
		FROM chunks c LEFT JOIN `+x.docsize()+` d ON d.id = c.seq WHERE c.client = ?`, x.client)
	if err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	defer rows.Close()
	// not *v = ...: v.mu is held
	v.gen, v.dim, v.pos, v.bySeq, v.ids, v.seqs, v.lens, v.tokens, v.flat, v.meta = -1, 0, nil, nil, nil, nil, nil, 0, nil, nil
	for rows.Next() {
		var c rag.Chunk
		var seq, ts int64
		var refs string
		var blob, size []byte
		if err := rows.Scan(&seq, &c.ID, &refs, &c.SourceURN, &c.SourceType, &c.Kind, &c.NodeKey, &ts, &blob, &size); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(refs), &c.GraphRefs); err != nil {
			return err
		}
		c.Timestamp = sqlitedb.Time(ts)
		v.put(c, decode(blob), seq, columnSize(size))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	v.gen = gen
	return nil
}

type scored struct {
	i     int
	score float32
}

// topK is a min-heap of the best scores seen.
type topK []scored

func (h topK) Len() int           { return len(h) }
func (h topK) Less(i, j int) bool { return h[i].score < h[j].score }
func (h topK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topK) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *topK) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

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

// dotsGo is dots in plain Go.
func dotsGo(q, flat []float32, dim int, out []float32) {
	for j := range out {
		out[j] = dot(q[:dim], flat[j*dim:(j+1)*dim])
	}
}

// scanBlock is how many rows scan scores per call to dots.
const scanBlock = 256

// scan scores rows [lo, hi) against q and keeps the best k that pass f.
func (v *vectors) scan(q []float32, f rag.Filter, filtered bool, lo, hi, k int) topK {
	h := make(topK, 0, k+1)
	var block [scanBlock]float32
	for start := lo; start < hi; start += scanBlock {
		end := min(start+scanBlock, hi)
		scores := block[:end-start]
		dots(q, v.flat[start*v.dim:end*v.dim], v.dim, scores)
		for j, s := range scores {
			i := start + j
			if filtered && !f.Matches(v.meta[i]) {
				continue
			}
			if len(h) < k {
				heap.Push(&h, scored{i, s})
			} else if s > h[0].score {
				h[0] = scored{i, s}
				heap.Fix(&h, 0)
			}
		}
	}
	return h
}

// NearVector implements rag.Index: an exact scan, split across the CPUs
// for large indexes.
func (x *index) NearVector(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	hits, seqs, err := x.nearVector(ctx, q)
	if err != nil {
		return nil, err
	}
	return x.withText(ctx, hits, seqs)
}

// nearVector scores without reading texts: the hits come with their
// chunks' row ids (withText).
func (x *index) nearVector(ctx context.Context, q rag.Query) ([]rag.Hit, map[string]int64, error) {
	if len(q.Vector) == 0 {
		return nil, nil, nil
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, nil, err
	}
	n := len(v.ids)
	if n == 0 {
		v.mu.RUnlock()
		return nil, nil, nil
	}
	if len(q.Vector) != v.dim {
		v.mu.RUnlock()
		return nil, nil, fmt.Errorf("%w: vector: %d dimensions, the index has %d", rag.ErrInvalid, len(q.Vector), v.dim)
	}
	qv := normalize(q.Vector)
	f := q.Filter
	filtered := f.Active()
	parts := 1
	if n >= 20_000 {
		parts = min(runtime.GOMAXPROCS(0), 8)
	}
	results := make([]topK, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Go(func() { results[p] = v.scan(qv, f, filtered, lo, hi, q.Limit) })
	}
	wg.Wait()
	var best topK
	for _, r := range results {
		for _, s := range r {
			if len(best) < q.Limit {
				heap.Push(&best, s)
			} else if s.score > best[0].score {
				best[0] = s
				heap.Fix(&best, 0)
			}
		}
	}
	hits := make([]rag.Hit, len(best))
	seqs := make(map[string]int64, len(best))
	for i := len(best) - 1; i >= 0; i-- {
		s := heap.Pop(&best).(scored)
		hits[i] = rag.Hit{Chunk: v.meta[s.i], Score: float64(s.score), VectorScore: float64(s.score)}
		seqs[v.ids[s.i]] = v.seqs[s.i]
	}
	v.mu.RUnlock()
	return hits, seqs, nil
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
	rows, err := x.s.db.R.QueryContext(ctx, `SELECT seq, client, id, text FROM chunks WHERE seq IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, x.s.db.Explain("chunk text", err)
	}
	defer rows.Close()
	type row struct{ client, id, text string }
	found := make(map[int64]row, len(want))
	for rows.Next() {
		var seq int64
		var r row
		if err := rows.Scan(&seq, &r.client, &r.id, &r.text); err != nil {
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
			h.Chunk.Text = r.text
			out = append(out, h)
		}
	}
	return out, nil
}
