package sqlite

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// The BM25 scored in Go from the FTS5 postings gives FTS5's own bm25()
// scores and order, the title column weighted twice the text: on the
// search test corpus, after updates and deletes
// (FTS5 rows deleted and written again under the same row id), with words
// that share a stem, accents, limits that cut the list, and a filter.
func TestBM25MatchesFTS5(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme").(*index)

	var corpus []struct{ Node, Type, Content string }
	raw, err := os.ReadFile("../../testdata/search/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	for _, extra := range []string{
		"Café résumé for the naïve reviewer", "cafe resume, reviewed", "Backups, backup and backing up the offsite backups",
		"the backup the backup the backup", "Résumé: Zoë's café in Brno",
	} {
		corpus = append(corpus, struct{ Node, Type, Content string }{"note:x", "NOTE", extra})
	}
	chunk := func(i int, text string) rag.Chunk {
		c := rag.Chunk{ID: fmt.Sprintf("c%03d", i), Text: text, SourceURN: fmt.Sprintf("urn:%d", i), SourceType: corpus[i].Type,
			GraphRefs: []string{corpus[i].Node}, Timestamp: time.Unix(int64(i), 0), Vector: []float32{1, float32(i)}}
		if i%3 != 0 { // most chunks carry their item's title, weighted twice
			words := strings.Fields(text)
			c.Title = strings.Join(words[:min(5, len(words))], " ")
		}
		return c
	}
	var chunks []rag.Chunk
	for i, d := range corpus {
		chunks = append(chunks, chunk(i, d.Content))
	}
	if err := x.Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	// Load the in-memory index, then change it in place: new text under the
	// same row ids, and deletes.
	if _, err := x.BM25(ctx, rag.Query{Text: "backup"}); err != nil {
		t.Fatal(err)
	}
	if err := x.Upsert(ctx, chunk(1, "Certificates renewed: the backup gateway certificate and the café backups"), chunk(4, corpus[7].Content)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Delete(ctx, "c002", "c010"); err != nil {
		t.Fatal(err)
	}

	compare := func(s *Store) int {
		x := s.For("acme").(*index)
		oracle := ftsOracle(t, x)
		var queries []struct{ Query string }
		raw, err = os.ReadFile("../../testdata/search/queries.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &queries); err != nil {
			t.Fatal(err)
		}
		for _, extra := range []string{"backups backup backing", "café résumé", "cafe", "Zoe", "certificate gateway backups"} {
			queries = append(queries, struct{ Query string }{extra})
		}
		compared := 0
		for _, qq := range queries {
			for _, q := range []rag.Query{
				{Text: qq.Query, Limit: 50},
				{Text: qq.Query, Limit: 3},
				{Text: qq.Query, Limit: 50, Filter: rag.Filter{SourceTypes: []string{"JIRA", "NOTE"}}},
			} {
				if err := q.Normalize(); err != nil {
					t.Fatal(err)
				}
				words := Terms(q.Text)
				tokens, err := s.tok.tokens(ctx, words)
				if err != nil {
					t.Fatal(err)
				}
				flat := make([]string, len(words))
				for i, tok := range tokens {
					if len(tok) != 1 {
						t.Fatalf("%q: word %q is %d tokens", q.Text, words[i], len(tok))
					}
					flat[i] = tok[0]
				}
				v, err := x.current(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := v.bm25(q, flat, true)
				seqs := v.complete(got)
				// Pruned or every posting scored, the same hits.
				if all, _ := v.score(q, flat, false, 1); !sameHits(all, got) {
					t.Fatalf("%q limit %d: every posting scored, %d hits, not bm25's %d", q.Text, q.Limit, len(all), len(got))
				}
				v.mu.RUnlock()
				if got, err = x.withText(ctx, got, seqs); err != nil {
					t.Fatal(err)
				}
				want, err := x.bm25SQL(ctx, oracle, q, words)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%q limit %d: %d hits, FTS5 %d", q.Text, q.Limit, len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					if math.Abs(g.BM25Score-w.BM25Score) > 1e-9*max(1, math.Abs(w.BM25Score)) {
						t.Fatalf("%q #%d: %s scores %.12f, FTS5 %s %.12f", q.Text, i, g.Chunk.ID, g.BM25Score, w.Chunk.ID, w.BM25Score)
					}
					tie := i > 0 && got[i-1].BM25Score == g.BM25Score || i+1 < len(got) && got[i+1].BM25Score == g.BM25Score
					if g.Chunk.ID != w.Chunk.ID && !tie {
						t.Fatalf("%q #%d: %s, FTS5 %s", q.Text, i, g.Chunk.ID, w.Chunk.ID)
					}
					if g.Chunk.Text == "" || g.Chunk.SourceURN != w.Chunk.SourceURN {
						t.Fatalf("%q #%d: chunk %+v, FTS5 %+v", q.Text, i, g.Chunk, w.Chunk)
					}
				}
				compared += len(got)
			}
		}
		return compared
	}
	compared := compare(s)
	path := s.db.Path
	reopened, err := Open(ctx, path) // the same index, loaded from the chunks
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	compared += compare(reopened)
	if compared < 200 {
		t.Fatalf("only %d hits compared", compared)
	}
}

// openTemp opens a store in a fresh directory, closed when the test ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Many keyword searches at once, more than the read pool has connections,
// all finish: none holds one connection while it waits for another.
func TestBM25Concurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme")
	var chunks []rag.Chunk
	for i := range 200 {
		chunks = append(chunks, rag.Chunk{ID: fmt.Sprint(i), Text: fmt.Sprintf("backup job %d failed on host %d", i, i%7),
			SourceURN: fmt.Sprint("urn:", i), Vector: []float32{1, float32(i)}})
	}
	if err := x.Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for range 64 {
		go func() {
			hits, err := x.Hybrid(ctx, rag.Query{Text: "backup failed", Vector: []float32{1, 3}, Limit: 5})
			if err == nil && len(hits) != 5 {
				err = fmt.Errorf("%d hits", len(hits))
			}
			done <- err
		}()
	}
	timeout := time.After(30 * time.Second)
	for range 64 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("searches stuck: a connection held while waiting for another?")
		}
	}
}

// Many upserts at once, more than the tokenizer keeps connections ready
// for, all finish, their words are searchable at once, and the in-memory
// index took every one of them in turn: it was never left stale (which
// makes the next search reload all of it).
func TestUpsertConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme")
	if err := x.Upsert(ctx, rag.Chunk{ID: "first", Text: "warm up", SourceURN: "urn:first", Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.BM25(ctx, rag.Query{Text: "warm"}); err != nil { // the index is live from here on
		t.Fatal(err)
	}
	const n = 32
	done := make(chan error)
	for i := range n {
		go func() {
			done <- x.Upsert(ctx, rag.Chunk{ID: fmt.Sprint(i), Text: fmt.Sprintf("restore drill zeta%d passed", i), SourceURN: fmt.Sprint("urn:", i),
				Vector: []float32{1, float32(i)}})
		}()
	}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("upserts stuck: a tokenizer connection waited for one held ready?")
		}
	}
	if v := s.vectorsOf("acme"); v.gen != n+1 {
		t.Fatalf("in-memory index at generation %d after %d writes: stale, reloaded on the next search", v.gen, n+1)
	}
	for i := range n {
		if hits, err := x.BM25(ctx, rag.Query{Text: fmt.Sprintf("zeta%d", i)}); err != nil || len(hits) != 1 || hits[0].Chunk.ID != fmt.Sprint(i) {
			t.Fatalf("zeta%d: %v %v", i, hits, err)
		}
	}
}

// Preload loads every client's index ahead of its first search.
func TestPreload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	for _, c := range []string{"acme", "globex"} {
		if err := s.For(c).Upsert(ctx, rag.Chunk{ID: "1", Text: "backup failed", SourceURN: "urn:1", Vector: []float32{1, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	loaded := map[string]int{}
	if err := s.Preload(ctx, func(client string, chunks int, _ time.Duration) { loaded[client] = chunks }); err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 || loaded["acme"] != 1 || loaded["globex"] != 1 {
		t.Fatalf("preloaded %v", loaded)
	}
	if v := s.vectorsOf("acme"); v.gen < 1 || v.ids.len() != 1 {
		t.Fatalf("acme's index not loaded: gen %d, %d chunks", v.gen, v.ids.len())
	}
}

// After Preload (a process that searches), a client that had no chunks
// has its index loaded from its first write and kept up by the writes
// after it, as a preloaded one is: its first search reads nothing whole.
// Without Preload (a process that only writes) it is left to its first
// search, and nothing is tokenized for it.
func TestNewClientsIndexResidentAfterPreload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, preload := range []bool{true, false} {
		s := openTemp(t)
		if preload {
			if err := s.Preload(ctx, nil); err != nil { // no client yet
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if err := s.For("initech").Upsert(ctx, rag.Chunk{ID: fmt.Sprint(i), Text: fmt.Sprintf("stapler number%d", i), SourceURN: "urn:1", Vector: []float32{1, float32(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		v := s.vectorsOf("initech")
		v.mu.RLock()
		gen, n := v.gen, v.ids.len()
		v.mu.RUnlock()
		if preload && (gen != 3 || n != 3) || !preload && gen != -1 {
			t.Fatalf("preload %v: the index's generation %d with %d chunks", preload, gen, n)
		}
		hits, err := s.For("initech").BM25(ctx, rag.Query{Text: "number2"})
		if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "2" {
			t.Fatalf("preload %v: %v %v", preload, hits, err)
		}
		// A client that already has chunks, not loaded (another process
		// wrote them), is still read whole at its first search.
		other, err := Open(ctx, s.db.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.For("initech").Upsert(ctx, rag.Chunk{ID: "9", Text: "number9", SourceURN: "urn:9", Vector: []float32{1, 9}}); err != nil {
			t.Fatal(err)
		}
		other.Close()
		if hits, err := s.For("initech").BM25(ctx, rag.Query{Text: "number9"}); err != nil || len(hits) != 1 || hits[0].Chunk.ID != "9" {
			t.Fatalf("preload %v, another process's write: %v %v", preload, hits, err)
		}
	}
}

// A chunk database of an earlier version (its FTS5 tables: the
// one-column ones of the first versions, or the two-column ones with their
// vocabulary, and no titles) is searched from its chunks as they are, and
// its FTS5 tables, shadow tables and all, are dropped when it is opened.
func TestOldIndexTablesAreDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	err := s.db.Write(ctx, "old index", func(tx sqlitedb.Tx) error {
		for _, stmt := range []string{
			`CREATE VIRTUAL TABLE "fts_acme" USING fts5(text, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2')`,
			`CREATE VIRTUAL TABLE "ftsv_acme" USING fts5vocab("fts_acme", 'row')`,
			`CREATE VIRTUAL TABLE "ftsi_acme" USING fts5vocab("fts_acme", 'instance')`,
			`CREATE VIRTUAL TABLE "fts2_globex" USING fts5(title, text, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2')`,
			`CREATE VIRTUAL TABLE "fts2v_globex" USING fts5vocab("fts2_globex", 'row')`,
			`INSERT INTO chunks (seq, client, id, text, graph_refs, source_urn, source_type, kind, node_key, ts, vector)
				VALUES (7, 'acme', 'c1', 'The backup gateway certificate expired', '[]', 'urn:1', 'NOTE', 'body', 'note:1', 0, x'0000803f')`,
			`INSERT INTO "fts_acme" (rowid, text) VALUES (7, 'The backup gateway certificate expired')`,
			`INSERT INTO chunks (seq, client, id, text, graph_refs, source_urn, source_type, kind, node_key, ts, vector)
				VALUES (8, 'globex', 'g1', 'Invoices are late', '[]', 'urn:2', 'NOTE', 'body', 'note:2', 0, x'0000803f')`,
			`INSERT INTO "fts2_globex" (rowid, title, text) VALUES (8, '', 'Invoices are late')`,
			`INSERT INTO generations (client, gen, chunks) VALUES ('acme', 1, 1), ('globex', 1, 1)`,
		} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	path := s.db.Path
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for client, want := range map[string]string{"acme": "c1", "globex": "g1"} {
		query := map[string]string{"acme": "certificates", "globex": "invoice"}[client]
		hits, err := s.For(client).BM25(ctx, rag.Query{Text: query})
		if err != nil || len(hits) != 1 || hits[0].Chunk.ID != want || hits[0].Chunk.Text == "" {
			t.Fatalf("%s: %v %+v", client, err, hits)
		}
	}
	var old []string
	rows, err := s.db.Query(ctx, `SELECT name FROM sqlite_master WHERE name GLOB 'fts*'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		old = append(old, name)
	}
	rows.Close()
	if len(old) != 0 {
		t.Fatalf("old tables left: %q", old)
	}
	// Their pages went back to the disk, not kept free in the file.
	var free int
	if err := s.db.R.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil || free != 0 {
		t.Fatalf("%d free pages left in the file (%v)", free, err)
	}
}

// Texts tokenized word by word through the memory give exactly FTS5's
// tokens of the whole text: on the search corpus and on text whose
// separators are not spaces (punctuation, dashes, NBSP, tabs, CJK, marks,
// emoji, identifiers, a 100-character word the memory does not keep).
func TestTextTokensMatchFTS5(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var corpus []struct{ Content string }
	raw, err := os.ReadFile("../../testdata/search/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"Ti.UI.Window's close() fails: TIMOB-1234 — see https://example.com/a?b=c&d#e",
		"naïve café\u00a0résumé\tZoë’s «quoted» words; x=1,y=2 … done",
		"東京の会議 Привет, мир! 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 emoji 🚀launch🚀 e\u0301te\u0301",
		"self-contained re-running 3.14159 v2.0.1-rc1 snake_case CamelCaseWord",
		strings.Repeat("a", 100) + " " + strings.Repeat("backup", 20) + " backups",
		"", "   ", "\u2028line\u2029para\u0085next",
		"caf\xe9 au lait\xff running e\u0301te\u0301 words", // not UTF-8: word by word
	}
	for _, c := range corpus {
		texts = append(texts, c.Content)
	}
	for _, order := range []string{"cold", "warm"} {
		var tk tokenizer
		defer tk.close()
		if order == "warm" {
			if _, err := tk.textTokens(ctx, texts[len(texts)/2:]); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tk.textTokens(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := tk.tokenize(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range texts {
			if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
				t.Fatalf("%s, text %d %q:\n word by word %q\n FTS5        %q", order, i, texts[i], got[i], want[i])
			}
		}
	}
}

// A term's encoded postings read back as they were added (in the order of
// their document numbers, as index numbers them); a seeker finds the first
// posting at or past a document through the blocks, and bounds a window by
// the blocks that may hold it.
func TestPostingListsRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var ps postings
	x, others := ps.term("x"), []uint32{ps.term("y"), ps.term("z")}
	var want []posting
	var lens []int32
	doc := uint32(0)
	for range 10_000 {
		switch r.IntN(3) {
		case 0:
			doc++
		case 1:
			doc += uint32(1 + r.IntN(66)) // one byte
		default:
			doc += uint32(1 + r.IntN(1<<16)) // anywhere after
		}
		p := posting{doc: doc, tf: float32(1+r.IntN(300)) * columnWeights[r.IntN(2)]}
		if r.IntN(4) > 0 {
			p.tf = float32(1+r.IntN(4)) * columnWeights[r.IntN(2)] // a few occurrences: one byte
		}
		length := int32(1 + r.IntN(2000))
		ps.add(x, p, length)
		want, lens = append(want, p), append(lens, length)
		// Other lists grow between x's postings: they move, and take
		// the rooms lists left, x's included.
		for _, o := range others {
			if r.IntN(3) == 0 {
				ps.add(o, posting{doc: doc, tf: 1}, 1)
			}
		}
	}
	for _, packed := range []bool{false, true} {
		if packed {
			ps.pack()
		}
		for i, o := range []string{"y", "z"} {
			l, _ := ps.list(o)
			prev, n := -1, 0
			for c := l.cursor(); ; n++ {
				p, ok := c.next()
				if !ok {
					break
				}
				if int(p.doc) <= prev || p.tf != 1 {
					t.Fatalf("packed %v: %s's posting %d is %+v after document %d", packed, o, n, p, prev)
				}
				prev = int(p.doc)
			}
			if n != int(ps.lists[others[i]].n) || n < 3000 {
				t.Fatalf("packed %v: %s holds %d postings, %d added", packed, o, n, ps.lists[others[i]].n)
			}
		}
	}
	l, _ := ps.list("x")
	var got []posting
	for c := l.cursor(); ; {
		p, ok := c.next()
		if !ok {
			break
		}
		got = append(got, p)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d postings back, %d added, not the same", len(got), len(want))
	}

	f := func(tf float32, length int32) float64 { return float64(tf) / float64(length) }
	// first is the index of the first posting at or past doc.
	first := func(doc uint32) int {
		i, _ := slices.BinarySearchFunc(want, doc, func(p posting, d uint32) int { return cmp.Compare(p.doc, d) })
		return i
	}
	s := l.seek()
	skipped := 0
	for target := uint32(0); s.at.doc != noDoc; {
		i := first(target)
		before := s.c.data
		s.advance(target)
		if i == len(want) {
			if s.at.doc != noDoc {
				t.Fatalf("advance(%d): at %d, past the end", target, s.at.doc)
			}
			break
		}
		if s.at != want[i] {
			t.Fatalf("advance(%d): at %+v, want %+v", target, s.at, want[i])
		}
		if s.read != i || s.block() != i/postingBlock {
			t.Fatalf("advance(%d): posting %d in block %d, read as %d", target, i, i/postingBlock, s.block())
		}
		skipped += len(before) - len(s.c.data)
		// A window from here: its bound holds every posting in it, and
		// comes from no block past the one of the first posting after it.
		hi := target + uint32(1+r.IntN(1<<24)) // up to 1,500 postings
		bound := s.bound(hi, f)
		end := first(hi)
		for j := i; j < end; j++ {
			if w := f(want[j].tf, lens[j]); w > bound {
				t.Fatalf("window [%d, %d): posting %d weighs %g, over the bound %g", target, hi, j, w, bound)
			}
		}
		// The most tf and the shortest row of the blocks spanned.
		var tf float32
		length := int32(math.MaxInt32)
		for j := i / postingBlock * postingBlock; j < min(len(want), (end/postingBlock+1)*postingBlock); j++ {
			tf, length = max(tf, want[j].tf), min(length, lens[j])
		}
		if most := f(tf, length); end > i && bound > most {
			t.Fatalf("window [%d, %d): bound %g, over %g, the most of the blocks it spans", target, hi, bound, most)
		}
		target += uint32(r.IntN(1 << 20))
	}
	if skipped == 0 {
		t.Fatal("no advance skipped a posting")
	}
}

// sameHits reports whether two BM25 rankings are the same: the same
// chunks in the same order, with the same scores to the last bit (the sums
// are in fixed point, whatever order they add their terms in).
func sameHits(a, b []rag.Hit) bool {
	return slices.EqualFunc(a, b, func(x, y rag.Hit) bool {
		return x.Chunk.ID == y.Chunk.ID && x.Score == y.Score && x.BM25Score == y.BM25Score
	})
}

// Pruned BM25 (MaxScore over the postings' blocks) returns what scoring
// every posting returns, on a corpus of many windows whose words are
// common and rare (Zipf), for queries of one word to 32, cut at 10 and 200
// chunks, filtered or not, before and after chunks are replaced and
// deleted — and scores well under half of the postings to do it.
func TestBM25PrunesAsIfItScoredAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme").(*index)
	r := rand.New(rand.NewPCG(7, 8))
	vocab := make([]string, 3000)
	for i := range vocab {
		var b strings.Builder
		for range 3 + r.IntN(3) {
			b.WriteByte("bcdfgklmnprtvz"[r.IntN(14)])
			b.WriteByte("aeiou"[r.IntN(5)])
		}
		vocab[i] = b.String()
	}
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(ws, " ")
	}
	chunk := func(i int) rag.Chunk {
		return rag.Chunk{ID: fmt.Sprintf("c%05d", i), Title: words(r.IntN(6)), Text: words(3 + r.IntN(150)),
			SourceURN: fmt.Sprintf("urn:%d", i), SourceType: []string{"JIRA", "EMAIL", "GIT"}[i%3], Vector: []float32{1, float32(i)}}
	}
	const n = 9000
	for lo := 0; lo < n; lo += 1000 {
		var batch []rag.Chunk
		for i := lo; i < lo+1000; i++ {
			batch = append(batch, chunk(i))
		}
		if err := x.Upsert(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(stage string) {
		var pruned, all int
		for qi := range 150 {
			q := rag.Query{Text: words(1 + qi%32), Limit: []int{10, 200}[qi%2]}
			if qi%5 == 0 {
				q.Filter = rag.Filter{SourceTypes: []string{"EMAIL"}}
			}
			if err := q.Normalize(); err != nil {
				t.Fatal(err)
			}
			tokens, err := s.tok.tokens(ctx, Terms(q.Text))
			if err != nil {
				t.Fatal(err)
			}
			var flat []string
			for _, tok := range tokens {
				flat = append(flat, tok...)
			}
			v, err := x.current(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, p := v.score(q, flat, true, 1)
			want, a := v.score(q, flat, false, 1)
			if !sameHits(got, want) {
				v.mu.RUnlock()
				t.Fatalf("%s: %q limit %d: pruned, %d hits not the %d of every posting scored", stage, q.Text, q.Limit, len(got), len(want))
			}
			// Scored in parts at once, the same again, pruned or not.
			for _, parts := range []int{2, 3, 4} {
				for _, prune := range []bool{true, false} {
					if split, _ := v.score(q, flat, prune, parts); !sameHits(split, want) {
						v.mu.RUnlock()
						t.Fatalf("%s: %q limit %d: in %d parts (pruned %v), %d hits not the %d of one part", stage, q.Text, q.Limit, parts, prune, len(split), len(want))
					}
				}
			}
			v.mu.RUnlock()
			if len(want) == 0 {
				t.Fatalf("%s: %q: no hits", stage, q.Text)
			}
			pruned, all = pruned+p, all+a
		}
		t.Logf("%s: %d postings scored of %d", stage, pruned, all)
		if pruned*2 > all {
			t.Fatalf("%s: pruned BM25 scored %d postings of %d", stage, pruned, all)
		}
	}
	compare("written")
	var changed []rag.Chunk
	for i := 0; i < n; i += 7 {
		changed = append(changed, chunk(i))
	}
	if err := x.Upsert(ctx, changed...); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for i := 3; i < n; i += 11 {
		gone = append(gone, fmt.Sprintf("c%05d", i))
	}
	if _, err := x.Delete(ctx, gone...); err != nil {
		t.Fatal(err)
	}
	v, err := x.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead := v.dead
	v.mu.RUnlock()
	if dead == 0 {
		t.Fatal("no posting dead after replacing and deleting chunks")
	}
	compare("replaced and deleted")
}

// The document frequencies that prune reads from memory are FTS5's own
// (its vocabulary's doc column) while no chunk has been replaced, and
// after replacements stay within the share of postings that is dead.
func TestDocFreqFromPostingsIsFTS5s(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	x := openTemp(t).For("acme").(*index)
	var chunks []rag.Chunk
	for i := range 300 {
		text := fmt.Sprintf("backup report %d", i)
		if i%3 == 0 {
			text += " restore failed"
		}
		if i%7 == 0 {
			text += " backups restored"
		}
		chunks = append(chunks, rag.Chunk{ID: fmt.Sprint("c", i), Text: text, Title: "nightly job", SourceURN: fmt.Sprint("urn:", i), Vector: []float32{1, 0}})
	}
	if err := x.Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	compare := func(slack float64) {
		t.Helper()
		v, err := x.current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer v.mu.RUnlock()
		ftsOracle(t, x)
		for _, tok := range []string{"backup", "report", "restor", "fail", "nightli", "job", "absent"} {
			want := ftsDocFreq(t, x, tok)
			if got := v.docFreq(tok); math.Abs(float64(got-want)) > slack*float64(want) {
				t.Errorf("%q: %d chunks from memory, FTS5 %d", tok, got, want)
			}
		}
	}
	compare(0)
	// rag.TermCounter counts words as keyword search matches them: stemmed.
	counts, total, err := x.DocFreqs(ctx, []string{"backups", "restored", "failed", "nightly", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range []string{"backup", "restor", "fail", "nightli", "absent"} {
		if want := ftsDocFreq(t, x, tok); counts[i] != want || total != len(chunks) {
			t.Errorf("DocFreqs: %d of %d chunks hold %q, FTS5 %d of %d", counts[i], total, tok, want, len(chunks))
		}
	}
	for i := range 60 { // replace a fifth: "restore" leaves them, "backup" stays
		chunks[i].Text = fmt.Sprintf("backup report %d replaced", i)
	}
	if err := x.Upsert(ctx, chunks[:60]...); err != nil {
		t.Fatal(err)
	}
	compare(0.25)
}

// A load sizes the index's rows to the client's chunks (grown row by row
// they held up to a quarter more than they used), and the index it loads
// searches as the one built by the writes.
func TestLoadReservesItsRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), FileName)
	writer, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	var chunks []rag.Chunk
	for i := range 1000 {
		chunks = append(chunks, rag.Chunk{ID: fmt.Sprint("c", i), Text: fmt.Sprintf("report %d of host %d", i, i%13), SourceURN: fmt.Sprint("urn:", i%90),
			Vector: []float32{1, float32(i % 17), float32(i % 5)}})
	}
	if err := writer.For("acme").Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	q := rag.Query{Text: "report host 7", Vector: []float32{1, 7, 2}, Limit: 20}
	want, err := writer.For("acme").Hybrid(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	x, err := Open(ctx, path) // another process's view: it loads the index

	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got, err := x.For("acme").Hybrid(ctx, q) // loads
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("loaded index: %d hits, written %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Chunk.ID != want[i].Chunk.ID || got[i].Score != want[i].Score {
			t.Fatalf("#%d: loaded %s %v, written %s %v", i, got[i].Chunk.ID, got[i].Score, want[i].Chunk.ID, want[i].Score)
		}
	}
	v := x.vectorsOf("acme")
	v.mu.RLock()
	defer v.mu.RUnlock()
	q8, q8Cap := v.q8.size()
	r8, r8Cap := v.r8.size()
	for name, lc := range map[string][2]int{"ids": {len(v.ids.keys), cap(v.ids.keys)}, "q8": {q8, q8Cap}, "r8": {r8, r8Cap},
		"docLen": {len(v.docLen), cap(v.docLen)}, "docRow": {len(v.docRow), cap(v.docRow)}} {
		if lc[0] == 0 || lc[0] != lc[1] {
			t.Errorf("%s: %d used of %d", name, lc[0], lc[1])
		}
	}
}

// The tokenizer remembers words by copies: a word of textTokens is a
// slice of its text, and a remembered slice kept the whole text in memory.
// (A text goes word by word when Go cannot tokenize it whole: here, for
// the byte that is not UTF-8.)
func TestRememberedWordsDoNotKeepTheirText(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	text := strings.Repeat("unremarkable ", 3) + "words of a long chunk text \xff " + strings.Repeat("x", 4096)
	if _, err := s.tok.textTokens(t.Context(), []string{text}); err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	if len(s.tok.known) == 0 {
		t.Fatal("no word remembered")
	}
	for w := range s.tok.known {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(w))); p >= start && p < start+uintptr(len(text)) {
			t.Fatalf("%q is remembered as a slice of its text", w)
		}
	}
}

// A query word that FTS5 splits (U+19B0, a New Tai Lue letter since
// Unicode 8, is a separator to FTS5's tables: "backupᦰgateway" is two
// tokens) is searched as its tokens, each a term, as the two words would
// be; its document frequency is the least of theirs; a word that is all
// such letters searches for nothing.
func TestWordFTS5SplitsIsSearchedAsItsTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	x := openTemp(t).For("acme").(*index)
	var chunks []rag.Chunk
	for i, text := range []string{"the backup gateway expired", "gateway rebooted", "backup restored", "backups of the gateway nightly", "unrelated text"} {
		chunks = append(chunks, rag.Chunk{ID: fmt.Sprint("c", i), Text: text, SourceURN: fmt.Sprint("urn:", i), Vector: []float32{1, 0}})
	}
	if err := x.Upsert(ctx, chunks...); err != nil {
		t.Fatal(err)
	}
	toks, err := x.s.tok.tokens(ctx, []string{"backup\u19b0gateway"})
	if err != nil || !slices.Equal(toks[0], []string{"backup", "gatewai"}) {
		t.Fatalf("FTS5's tokens of the word: %q %v (the test's premise)", toks, err)
	}
	split, err := x.BM25(ctx, rag.Query{Text: "backup\u19b0gateway", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	two, err := x.BM25(ctx, rag.Query{Text: "backup gateway", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(split) != 4 || !sameHits(split, two) || split[0].Chunk.ID != "c0" && split[0].Chunk.ID != "c3" {
		t.Fatalf("split word: %+v\nthe two words: %+v", split, two)
	}
	counts, total, err := x.DocFreqs(ctx, []string{"backup\u19b0gateway", "backup", "gateway", "\u19b0\u19b1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 3, 3, 0}; !slices.Equal(counts, want) || total != 5 {
		t.Fatalf("DocFreqs %v of %d, want %v of 5", counts, total, want)
	}
	if hits, err := x.BM25(ctx, rag.Query{Text: "\u19b0\u19b1"}); err != nil || len(hits) != 0 {
		t.Fatalf("a word of no tokens: %v %+v", err, hits)
	}
}

// Words that are not valid UTF-8 reach FTS5 as they are: tokenize gives
// the tokens FTS5 makes of the same bytes written straight into a row.
func TestTokenizeKeepsTheBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var tk tokenizer
	defer tk.close()
	words := []string{"caf\xe9", "lait\xffrunning", "ab\xc3cd", "plain"}
	got, err := tk.tokenize(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{`CREATE VIRTUAL TABLE q USING fts5(w, tokenize='` + tokenizerSpec + `')`, `CREATE VIRTUAL TABLE qi USING fts5vocab(q, 'instance')`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range words {
		if _, err := db.ExecContext(ctx, `INSERT INTO q (rowid, w) VALUES (?, ?)`, i, w); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT doc, term FROM qi ORDER BY doc, offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := make([][]string, len(words))
	for rows.Next() {
		var doc int
		var term string
		if err := rows.Scan(&doc, &term); err != nil {
			t.Fatal(err)
		}
		want[doc] = append(want[doc], term)
	}
	for i := range words {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("%q: tokenize %q, FTS5 %q", words[i], got[i], want[i])
		}
	}
}
