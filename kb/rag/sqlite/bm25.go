package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"maps"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// BM25 is scored here in Go, exactly as FTS5's bm25() scores it (k1 = 1.2,
// b = 0.75, IDF log((N - n + 0.5) / (n + 0.5)) floored at 1e-6; fts5_aux.c),
// from an inverted index held in memory with the vectors: the postings of
// the chunks' FTS5 tokens (postings.go) and the chunks' lengths in tokens.
// (FTS5's ORDER BY rank calls bm25() on every matching row, and bm25()
// looks the row's length up with a statement of its own each time: at
// 100,000 chunks that was three quarters of a keyword query.) A test
// checks that both give the same scores and order (fts5_test.go).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// columnWeights weigh a term's occurrences by column, as FTS5's bm25()
// does given weights: the title of a chunk's item (carried by each of its
// chunks) counts twice its text. The length a row is normalised by is its
// whole size, all columns (fts5_aux.c).
var columnWeights = [2]float32{2, 1}

// tokenizer turns query words into FTS5 tokens with FTS5 itself, so that a
// word's token is the one the index holds whatever the stemmer and the
// Unicode rules make of it: each connection of a private in-memory database
// has an FTS5 table with the chunks' tokenizer, into which the words are
// written and from whose vocabulary they are read back.
//
// A word's tokens never change, so they are remembered (up to
// tokenCacheSize words; then the memory starts afresh).
type tokenizer struct {
	once sync.Once
	db   *sql.DB
	free chan *tokenConn // connections ready for use
	err  error

	mu    sync.Mutex
	known map[string][]string

	classes runeClasses // code points above ASCII, as FTS5 treats them (gotokens.go)
}

// tokenCacheSize is how many words' tokens are remembered: the
// vocabulary of a few hundred thousand chunks of real text, about 20 MiB.
const tokenCacheSize = 200_000

// tokenCacheWordBytes is the longest word remembered: a longer one (a
// hash, a base64 run) is seldom seen twice.
const tokenCacheWordBytes = 64

const tokenizerSpec = `porter unicode61 remove_diacritics 2`

// tokens returns, for each word, its FTS5 tokens in order.
func (t *tokenizer) tokens(ctx context.Context, words []string) ([][]string, error) {
	out := make([][]string, len(words))
	var unknown []string
	t.mu.Lock()
	for i, w := range words {
		toks, ok := t.known[w]
		if !ok {
			unknown = append(unknown, w)
		}
		out[i] = toks
	}
	t.mu.Unlock()
	if len(unknown) == 0 {
		return out, nil
	}
	toks, err := t.tokenizeWords(ctx, unknown)
	if err != nil {
		return nil, err
	}
	fresh := make(map[string][]string, len(unknown))
	for i, w := range unknown {
		fresh[w] = toks[i]
	}
	for i, w := range words {
		if tk, ok := fresh[w]; ok {
			out[i] = tk
		}
	}
	maps.DeleteFunc(fresh, func(w string, _ []string) bool { return len(w) > tokenCacheWordBytes })
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known == nil || len(t.known)+len(fresh) > tokenCacheSize {
		t.known = make(map[string][]string, len(fresh))
	}
	for w, tk := range fresh {
		// A copy: w may be a slice of a chunk's whole text (textTokens),
		// which the memory would otherwise keep (88 MB of texts for the
		// 178,000 words of a 600,000-chunk load).
		t.known[strings.Clone(w)] = tk
	}
	return out, nil
}

// textTokens returns each text's FTS5 tokens in order: made in Go
// (gotokens.go) from the whole text, or, for a text Go cannot settle
// (see goWordTokens), word by word through tokens' memory: FTS5's
// unicode61 tokenizer separates at every white space (a token is letters,
// digits and private-use characters) and the Porter stemmer stems each
// token alone, so a text's tokens are its white-space separated words'
// tokens one after another. (Tokenizing each chunk's whole text with FTS5
// was a sixth of the qualifier's CPU on a real Jira import.)
func (t *tokenizer) textTokens(ctx context.Context, texts []string) ([][]string, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	out, err := t.goTokens(ctx, texts)
	if err != nil {
		return nil, err
	}
	fields := make(map[int][]string)
	seen := map[string]bool{}
	var words []string
	for i, text := range texts {
		if out[i] != nil {
			continue
		}
		fields[i] = strings.Fields(text)
		for _, w := range fields[i] {
			if !seen[w] {
				seen[w] = true
				words = append(words, w)
			}
		}
	}
	if len(fields) == 0 {
		return out, nil
	}
	toks, err := t.tokens(ctx, words)
	if err != nil {
		return nil, err
	}
	of := make(map[string][]string, len(words))
	for i, w := range words {
		of[w] = toks[i]
	}
	for i, fs := range fields {
		for _, w := range fs {
			out[i] = append(out[i], of[w]...)
		}
	}
	return out, nil
}

// tokenizeWords returns each word's tokens: in Go (gotokens.go), or from
// FTS5 for the words Go cannot settle.
func (t *tokenizer) tokenizeWords(ctx context.Context, words []string) ([][]string, error) {
	out, err := t.goTokens(ctx, words)
	if err != nil {
		return nil, err
	}
	var rest []string
	var at []int
	for i, toks := range out {
		if toks == nil {
			rest, at = append(rest, words[i]), append(at, i)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	toks, err := t.tokenize(ctx, rest)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = toks[j]
	}
	return out, nil
}

// tokenize asks FTS5 for the tokens of each text.
func (t *tokenizer) tokenize(ctx context.Context, words []string) ([][]string, error) {
	if len(words) == 0 {
		return nil, nil
	}
	t.once.Do(func() {
		t.db, t.err = sql.Open("sqlite", "file::memory:")
		if t.err == nil {
			// As many connections as tokenize at once (a connection
			// held ready is out of the pool: a cap would wait forever);
			// GOMAXPROCS of them are kept ready.
			n := runtime.GOMAXPROCS(0)
			t.db.SetMaxIdleConns(n)
			t.free = make(chan *tokenConn, n)
		}
	})
	if t.err != nil {
		return nil, t.err
	}
	c, err := t.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := c.tokenize(ctx, words)
	if err != nil {
		c.close()
		return nil, err
	}
	select {
	case t.free <- c:
	default:
		c.close()
	}
	return out, nil
}

// tokenConn is one connection of the tokenizer's in-memory database, its
// tables made and its statements prepared once: a chunk's upsert
// tokenizes its text, and making the tables and parsing the statements
// each time was most of that.
type tokenConn struct {
	conn                 *sql.Conn
	clear, insert, vocab *sql.Stmt
}

// conn returns a free connection, or a new one.
func (t *tokenizer) conn(ctx context.Context) (*tokenConn, error) {
	select {
	case c := <-t.free:
		return c, nil
	default:
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &tokenConn{conn: conn}
	// Every connection is its own in-memory database: its own tables.
	for _, stmt := range []string{
		`CREATE VIRTUAL TABLE IF NOT EXISTS q USING fts5(w, tokenize='` + tokenizerSpec + `')`,
		`CREATE VIRTUAL TABLE IF NOT EXISTS qi USING fts5vocab(q, 'instance')`,
	} {
		if _, err = conn.ExecContext(ctx, stmt); err != nil {
			break
		}
	}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&c.clear, `DELETE FROM q`},
		{&c.insert, `INSERT INTO q (rowid, w) SELECT key, value FROM json_each(?)`},
		{&c.vocab, `SELECT doc, offset, term FROM qi ORDER BY doc, offset`},
	} {
		if err == nil {
			*p.dst, err = conn.PrepareContext(ctx, p.sql)
		}
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *tokenConn) tokenize(ctx context.Context, words []string) ([][]string, error) {
	if _, err := c.clear.ExecContext(ctx); err != nil {
		return nil, err
	}
	if _, err := c.insert.ExecContext(ctx, sqlitedb.JSONList(words)); err != nil {
		return nil, err
	}
	rows, err := c.vocab.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([][]string, len(words))
	for rows.Next() {
		var doc, offset int
		var term string
		if err := rows.Scan(&doc, &offset, &term); err != nil {
			return nil, err
		}
		out[doc] = append(out[doc], term)
	}
	return out, rows.Err()
}

func (c *tokenConn) close() {
	for _, st := range []*sql.Stmt{c.clear, c.insert, c.vocab} {
		if st != nil {
			st.Close()
		}
	}
	c.conn.Close()
}

func (t *tokenizer) close() error {
	if t.db == nil {
		return nil
	}
	for {
		select {
		case c := <-t.free:
			c.close()
		default:
			return t.db.Close()
		}
	}
}

// bm25 scores the chunks holding any of tokens (one per query word, as
// FTS5 takes each quoted word as a phrase; a token may repeat) from the
// in-memory postings and returns the best q.Limit that pass q.Filter,
// without their texts but with their row ids (withText). The caller holds
// v's read lock.
//
// It scores only what may make the best q.Limit, as Lucene's MaxScore
// does (Turtle and Flood, 1995): the documents are taken a window of
// scoreWindow at a time; in each, the terms are ordered by the most they
// can add there (the bounds of their blocks in it, pblock), and the
// weakest terms, whose bounds together stay under the worst score kept,
// find no documents: the others do, and the weak ones are then added, the
// strongest first, only to the documents found that may still pass the
// worst kept with them. A window where no term can reach it is skipped,
// its blocks unread. What comes back is exactly what scoring every
// posting gives (TestBM25PrunesAsIfItScoredAll; the sums are in fixed
// point, fixedOne). At 583,000 chunks (100,000 synthetic documents) about
// half the postings of the queries of `jervis bench` are scored, and a
// search feedback's query of 32 words takes a third less time
// (BENCHMARKS.md).
//
// When no other query scores, a large index's document numbers are cut
// into a part per CPU, scored at once, each part's best kept apart and
// the worst of any of them shared as the floor (Lucene's concurrent
// search over segments, with the minimum competitive score shared): on
// two CPUs, a feedback query of 32 words at 583,000 chunks took 8.3 ms at
// the median instead of 14.5 (BENCHMARKS.md); under load each query runs
// on one.
//
// split is false for a search no one waits on (rag.InBackground): scored
// in parts, a query reads more postings (each part's floor starts low),
// about 8 % more at 583,000 chunks, and with the CPUs busy ingesting that
// costs throughput for nothing.
func (v *vectors) bm25(q rag.Query, tokens []string, split bool) []rag.Hit {
	parts := activeScores.enter(len(v.docRow), split)
	hits, _ := v.score(q, tokens, true, parts)
	activeScores.leave()
	return hits
}

// activeScores counts the BM25 queries scoring in this process.
var activeScores running

// Scores are summed in fixed point, exactly: in whatever order a
// document's terms are added (the window's essential terms first, then
// the weak ones; windows that start elsewhere when the documents are
// scored in parts), it scores the same to the last bit, so pruned, every
// posting scored, in one part or in several, the hits are the same.
// fixedOne is 1 in it: a term adds at most about 35 (IDF ≤ ln 2N, times
// k1 + 1), 32 terms at most 2^11, far inside an int64, each rounded to
// within 2^-41 of BM25's float.
const fixedOne = 1 << 40

func fixed(x float64) int64 { return int64(x*fixedOne + 0.5) }

// noFloor is the floor before q.Limit documents are kept: below any
// score, and far enough above the int64's least that bounds subtracted
// from it do not wrap.
const noFloor = math.MinInt64 / 2

// termStats is what a query token's postings are scored with.
type termStats struct {
	l           *postingList
	idf         float64
	k, perToken float64 // BM25's length normalisation: k1 (1 - b), k1 b / avgdl
}

// score is bm25, pruned or not, with the documents in parts scored at
// once (the same hits either way), and how many postings it scored. The
// hits' chunks carry their IDs alone (complete reads the rest).
func (v *vectors) score(q rag.Query, tokens []string, prune bool, parts int) ([]rag.Hit, int) {
	rows := v.ids.len()
	if rows == 0 {
		return nil, 0
	}
	n := float64(rows)
	avgdl := float64(v.tokens) / n
	stats := make([]termStats, 0, len(tokens))
	for _, tok := range tokens {
		l, ok := v.list(tok)
		if !ok {
			continue
		}
		hits := float64(v.liveRows(&l))
		idf := math.Log((n - hits + 0.5) / (hits + 0.5))
		if idf <= 0 {
			idf = 1e-6
		}
		stats = append(stats, termStats{l: &l, idf: idf, k: bm25K1 * (1 - bm25B), perToken: bm25K1 * bm25B / avgdl})
	}
	docs := uint32(len(v.docRow))
	parts = max(1, min(parts, int(docs/scoreWindow)))
	scorers := make([]*part, parts)
	if parts == 1 {
		scorers[0] = v.newPart(q, stats, prune, nil)
		scorers[0].docs(0, docs)
		scorers[0].done()
	} else {
		// The parts take the documents a segment at a time, the next
		// not taken (a part that meets fewer postings takes more), each
		// keeps its own best, and the worst any of them keeps is a floor
		// for all: q.Limit documents score at least that.
		var next atomic.Uint32
		var floor atomic.Int64
		floor.Store(noFloor)
		var wg sync.WaitGroup
		for i := range parts {
			// Each part waits for its CPU (getScratch) on its own: the
			// query holds none while it waits for another.
			wg.Go(func() {
				p := v.newPart(q, stats, prune, &floor)
				scorers[i] = p
				defer p.done()
				for {
					seg := uint64(next.Add(1) - 1)
					if seg*scoreSegment >= uint64(docs) {
						return
					}
					p.docs(uint32(seg*scoreSegment), uint32(min(uint64(docs), (seg+1)*scoreSegment)))
				}
			})
		}
		wg.Wait()
	}
	var best ranked
	scored := 0
	for _, p := range scorers {
		best = append(best, p.best...)
		scored += p.scored
	}
	slices.SortFunc(best, func(a, b rankedHit) int {
		if v.better(a, b) {
			return -1
		}
		return 1
	})
	best = best[:min(q.Limit, len(best))]
	hits := getHits(len(best))
	for j, r := range best {
		s := float64(r.score) / fixedOne
		hits[j] = rag.Hit{Chunk: rag.Chunk{ID: v.ids.id(r.i)}, Score: s, BM25Score: s}
	}
	return hits, scored
}

// scoreSegment is how many document numbers a part of a query scored in
// parts takes at a time: 16 windows (at 583,000 chunks, 32-word queries
// in two parts took 8.3 ms at the median, 8.6–9.1 with 8 windows and
// 8.9–9.2 with 32, 14.5 in one part; halves fixed in advance 9.2–10).
const scoreSegment = 16 * scoreWindow

// part is one part of a BM25 query: its own reading of the postings, its
// window's sums and its best documents.
type part struct {
	v        *vectors
	q        rag.Query
	filtered bool
	prune    bool
	dead     bool         // some posting is of a dead row
	terms    []*queryTerm // in the query's order
	order    []*queryTerm // by bound in the window
	below    []int64      // below[j]: order[:j]'s bounds summed
	sc       *scratch
	best     ranked // a min-heap: the worst kept on top
	shared   *atomic.Int64
	scored   int // postings scored
}

// newPart starts a part of a query; shared, when not nil, is the floor the
// parts scoring at once share: each raises it to the worst it keeps, and
// finds no document under it. done gives its scratch (and its CPU) back
// once its documents are scored.
func (v *vectors) newPart(q rag.Query, stats []termStats, prune bool, shared *atomic.Int64) *part {
	p := &part{v: v, q: q, filtered: q.Filter.Active(), prune: prune, dead: v.dead > 0, shared: shared,
		terms: make([]*queryTerm, len(stats)), order: make([]*queryTerm, len(stats)), below: make([]int64, len(stats)+1),
		sc: getScratch(), best: make(ranked, 0, q.Limit+1)}
	for i, st := range stats {
		p.terms[i] = &queryTerm{seeker: st.l.seek(), termStats: st}
	}
	return p
}

func (p *part) done() { putScratch(p.sc) }

// worst is the score a document must reach to be kept: none until q.Limit
// are (here or, shared, in any part).
func (p *part) worst() int64 {
	w := int64(noFloor)
	if len(p.best) == p.q.Limit {
		w = p.best[0].score
	}
	if p.shared != nil {
		w = max(w, p.shared.Load())
	}
	return w
}

// consider keeps row, which scores s, if it is among the best and passes
// the filter.
func (p *part) consider(row int32, s int64) {
	// Most rows score below the worst kept: compared by score alone,
	// without reading their row ids.
	if s < p.worst() {
		return
	}
	if p.filtered && !p.v.matches(p.q.Filter, int(row)) {
		return
	}
	r := rankedHit{i: int(row), score: s}
	if len(p.best) < p.q.Limit {
		p.best = append(p.best, r)
		p.up(len(p.best) - 1)
	} else if p.v.better(r, p.best[0]) {
		p.best[0] = r
		p.down(0)
	}
	if p.shared == nil || len(p.best) < p.q.Limit {
		return
	}
	for w := p.best[0].score; ; {
		old := p.shared.Load()
		if w <= old || p.shared.CompareAndSwap(old, w) {
			return
		}
	}
}

// docs scores the documents numbered [from, to), past those scored
// before, window by window.
func (p *part) docs(from, to uint32) {
	v, terms, order, below, sc := p.v, p.terms, p.order, p.below, p.sc
	for lo := from; lo < to; {
		// The next window starts at the first posting left.
		next := uint32(noDoc)
		for _, t := range terms {
			t.advance(lo)
			next = min(next, t.at.doc)
		}
		if next >= to {
			break
		}
		lo = next
		hi := lo + min(scoreWindow, to-lo)
		for i, t := range terms {
			// A little over: the bound is a float, a posting's weight is
			// rounded to the fixed point.
			t.bound = 0
			if b := t.seeker.bound(hi, t.weight); b > 0 {
				t.bound = int64(math.Ceil(b*(1+1e-9)*fixedOne)) + 1
			}
			order[i] = t
		}
		slices.SortFunc(order, func(a, b *queryTerm) int { return cmp.Compare(a.bound, b.bound) })
		// order[:k] cannot make a document of this window pass on their
		// own: they find none, and are added to those the others find.
		floor := int64(noFloor)
		if p.prune {
			floor = p.worst()
		}
		for j, t := range order {
			below[j+1] = below[j] + t.bound
		}
		k := 0
		for k < len(order) && below[k+1] < floor {
			k++
		}
		if k == len(order) {
			lo = hi
			continue
		}
		for _, t := range terms {
			t.essential = false
		}
		for _, t := range order[k:] {
			t.essential = true
		}
		for _, t := range terms {
			if !t.essential {
				continue
			}
			for ; t.at.doc < hi; t.next() {
				if p.dead && v.docRow[t.at.doc] < 0 {
					continue
				}
				p.scored++
				sc.add(t.at.doc-lo, fixed(t.weight(t.at.tf, v.docLen[t.at.doc])))
			}
		}
		// The other terms, strongest first, each added to the documents
		// that may still pass the worst kept with it and the ones after.
		words := sc.hit[:(hi-lo+63)/64]
		for j := k - 1; j >= 0; j-- {
			floor := p.worst() - below[j+1]
			left := 0
			for w, word := range words {
				for rest := word; rest != 0; rest &= rest - 1 {
					d := uint32(w*64 + bits.TrailingZeros64(rest))
					if sc.score[d] < floor {
						sc.score[d] = 0
						word &^= 1 << (d % 64)
					}
				}
				words[w] = word
				left += bits.OnesCount64(word)
			}
			if left == 0 {
				break
			}
			t := order[j]
			for ; t.at.doc < hi; t.next() {
				d := t.at.doc - lo
				if words[d/64]&(1<<(d%64)) != 0 {
					p.scored++
					sc.score[d] += fixed(t.weight(t.at.tf, v.docLen[t.at.doc]))
				}
			}
		}
		for w, word := range words {
			words[w] = 0
			for ; word != 0; word &= word - 1 {
				d := uint32(w*64 + bits.TrailingZeros64(word))
				s := sc.score[d]
				sc.score[d] = 0
				p.consider(v.docRow[lo+d], s)
			}
		}
		lo = hi
	}
}

// queryTerm is a query token's postings being read by bm25.
type queryTerm struct {
	*seeker
	termStats
	bound     int64 // the most it can add to a document of the window, in fixed point
	essential bool  // read for the window, not only looked up
}

// weight is what an occurrence count tf in a row of length tokens adds.
func (t *termStats) weight(tf float32, length int32) float64 {
	x := float64(tf)
	return t.idf * (x * (bm25K1 + 1)) / (x + t.k + t.perToken*float64(length))
}

// liveRows is how many live rows hold l's term: its postings while none
// is dead, else those of live rows, counted.
func (v *vectors) liveRows(l *postingList) int {
	if v.dead == 0 {
		return int(l.n)
	}
	live := 0
	for c := l.cursor(); ; {
		p, ok := c.next()
		if !ok {
			return live
		}
		if v.docRow[p.doc] >= 0 {
			live++
		}
	}
}

// scoreWindow is how many document numbers bm25 scores at once: its sums
// fit in the core's first cache.
const scoreWindow = 2048

// scratch is bm25's sums for a window of documents and which of them
// hold any.
type scratch struct {
	score [scoreWindow]int64 // in fixed point
	hit   [scoreWindow / 64]uint64
}

func (sc *scratch) add(d uint32, s int64) {
	sc.hit[d/64] |= 1 << (d % 64)
	sc.score[d] += s
}

// scratches are the scratch arrays not in use, and scorers bounds how
// many queries score at once: one per CPU, as scoring is CPU-bound (16
// searches at once would only take turns).
var (
	scratches = make(chan *scratch, runtime.GOMAXPROCS(0))
	scorers   = make(chan struct{}, runtime.GOMAXPROCS(0))
)

func getScratch() *scratch {
	scorers <- struct{}{}
	select {
	case sc := <-scratches:
		return sc
	default:
		return new(scratch)
	}
}

// putScratch gives sc back, every sum and mark cleared (bm25 clears
// them as it reads them).
func putScratch(sc *scratch) {
	scratches <- sc
	<-scorers
}

// rankedHit is a BM25 candidate: row i of the vectors.
type rankedHit struct {
	i     int
	score int64 // in fixed point
}

// better orders by score, then by the chunk's row id (its seq: FTS5's
// order among equals, as an FTS5 rowid was the seq): read only for equal
// scores (reading every candidate's, at rows all over
// the index, was a cache miss each: 3 % of the HTTP benchmark's CPU).
func (v *vectors) better(a, b rankedHit) bool {
	return a.score > b.score || a.score == b.score && v.seqs[a.i] < v.seqs[b.i]
}

// ranked is a min-heap: the worst kept candidate on top.
type ranked []rankedHit

// up and down restore p.best's heap order after its element i was added
// (up) or replaced (down), as container/heap's Push and Fix do, without
// an interface call per comparison.
func (p *part) up(i int) {
	h := p.best
	for i > 0 {
		parent := (i - 1) / 2
		if !p.v.better(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (p *part) down(i int) {
	h := p.best
	for {
		worst := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) && p.v.better(h[worst], h[c]) {
				worst = c
			}
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}
