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
type vectors struct {
	mu   sync.RWMutex
	gen  int64 // generation loaded; -1 = not loaded or stale
	dim  int
	pos  map[string]int
	ids  []string
	flat []float32
	meta []rag.Chunk // without Text and Vector
}

func (v *vectors) put(c rag.Chunk, vec []float32) {
	if v.pos == nil {
		v.pos = map[string]int{}
	}
	if v.dim == 0 {
		v.dim = len(vec)
	}
	m := c
	m.Text, m.Vector = "", nil
	if i, ok := v.pos[c.ID]; ok {
		copy(v.flat[i*v.dim:], vec)
		v.meta[i] = m
		return
	}
	v.pos[c.ID] = len(v.ids)
	v.ids = append(v.ids, c.ID)
	v.flat = append(v.flat, vec...)
	v.meta = append(v.meta, m)
}

func (v *vectors) remove(id string) {
	i, ok := v.pos[id]
	if !ok {
		return
	}
	last := len(v.ids) - 1
	if i != last {
		v.ids[i], v.meta[i] = v.ids[last], v.meta[last]
		copy(v.flat[i*v.dim:(i+1)*v.dim], v.flat[last*v.dim:])
		v.pos[v.ids[i]] = i
	}
	delete(v.pos, id)
	v.ids, v.meta, v.flat = v.ids[:last], v.meta[:last], v.flat[:last*v.dim]
}

// current returns the client's vectors, reloading them when another writer
// changed the client's chunks. The result is read-locked; call RUnlock.
func (x *index) current(ctx context.Context) (*vectors, error) {
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
	rows, err := tx.QueryContext(ctx, `SELECT id, graph_refs, source_urn, source_type, kind, node_key, ts, vector FROM chunks WHERE client = ?`, x.client)
	if err != nil {
		return x.s.db.Explain("load vectors", err)
	}
	defer rows.Close()
	v.gen, v.dim, v.pos, v.ids, v.flat, v.meta = -1, 0, nil, nil, nil, nil // not *v = ...: v.mu is held
	for rows.Next() {
		var c rag.Chunk
		var refs string
		var ts int64
		var blob []byte
		if err := rows.Scan(&c.ID, &refs, &c.SourceURN, &c.SourceType, &c.Kind, &c.NodeKey, &ts, &blob); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(refs), &c.GraphRefs); err != nil {
			return err
		}
		c.Timestamp = sqlitedb.Time(ts)
		v.put(c, decode(blob))
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

// scan scores rows [lo, hi) against q and keeps the best k that pass f.
func (v *vectors) scan(q []float32, f rag.Filter, filtered bool, lo, hi, k int) topK {
	h := make(topK, 0, k+1)
	for i := lo; i < hi; i++ {
		if filtered && !f.Matches(v.meta[i]) {
			continue
		}
		s := dot(q, v.flat[i*v.dim:(i+1)*v.dim])
		if len(h) < k {
			heap.Push(&h, scored{i, s})
		} else if s > h[0].score {
			h[0] = scored{i, s}
			heap.Fix(&h, 0)
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
	if len(q.Vector) == 0 {
		return nil, nil
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	n := len(v.ids)
	if n == 0 {
		v.mu.RUnlock()
		return nil, nil
	}
	if len(q.Vector) != v.dim {
		v.mu.RUnlock()
		return nil, fmt.Errorf("%w: vector: %d dimensions, the index has %d", rag.ErrInvalid, len(q.Vector), v.dim)
	}
	qv := normalize(q.Vector)
	f := q.Filter
	filtered := len(f.SourceTypes)+len(f.Kinds)+len(f.NodeTypes) > 0 || f.SourceURN != "" || !f.Since.IsZero() || !f.Until.IsZero()
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
	ids := make([]string, len(best))
	for i := len(best) - 1; i >= 0; i-- {
		s := heap.Pop(&best).(scored)
		hits[i] = rag.Hit{Chunk: v.meta[s.i], Score: float64(s.score), VectorScore: float64(s.score)}
		ids[i] = v.ids[s.i]
	}
	v.mu.RUnlock()
	chunks, err := x.Get(ctx, ids...)
	if err != nil {
		return nil, err
	}
	text := make(map[string]string, len(chunks))
	for _, c := range chunks {
		text[c.ID] = c.Text
	}
	out := hits[:0]
	for _, h := range hits {
		if t, ok := text[h.Chunk.ID]; ok { // deleted since the scan: skip
			h.Chunk.Text = t
			out = append(out, h)
		}
	}
	return out, nil
}
