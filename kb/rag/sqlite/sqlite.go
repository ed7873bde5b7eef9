// Package sqlite is the embedded chunk backend: chunks in one SQLite file;
// BM25 over FTS5's tokens (porter stemming, unicode61 with diacritics
// removed, so "cafe" finds "café" and "reviews" finds "review") and the
// vectors, both held in memory per client and scored there.
//
// The chunks table is all that is stored: each client's index (postings
// and vectors) is loaded from it on its first search, its texts
// tokenized as FTS5 tokenizes them, and kept in step with this process's
// writes. (Earlier versions also kept a contentless FTS5 table per client;
// BM25 read its postings and row sizes, then only its row sizes, and its
// upkeep was a fifth of the qualifier's CPU on a real Jira import: Open
// drops those tables.) A per-client generation counter, bumped
// in every write transaction, tells a process when another one changed the
// client's chunks, and the vectors are reloaded.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// FileName is the database file in a data directory.
const FileName = "chunks.db"

var migrations = []string{`
CREATE TABLE chunks (
	seq         INTEGER PRIMARY KEY,
	client      TEXT NOT NULL,
	id          TEXT NOT NULL,
	text        TEXT NOT NULL,
	graph_refs  TEXT NOT NULL,
	source_urn  TEXT NOT NULL,
	source_type TEXT NOT NULL,
	kind        TEXT NOT NULL,
	node_key    TEXT NOT NULL,
	ts          INTEGER NOT NULL,
	vector      BLOB NOT NULL,
	UNIQUE (client, id)
) STRICT;
CREATE INDEX chunks_source ON chunks (client, source_urn);
CREATE INDEX chunks_node ON chunks (client, node_key);
CREATE TABLE generations (client TEXT PRIMARY KEY, gen INTEGER NOT NULL) STRICT;
`,
	// 2: an exact chunk count per client, kept with the generation.
	`
ALTER TABLE generations ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;
UPDATE generations SET chunks = (SELECT count(*) FROM chunks c WHERE c.client = generations.client);
`,
	// 3: the title of a chunk's item, a BM25 field of its own (the FTS
	// tables of two columns replace the old ones on each client's first use).
	`
ALTER TABLE chunks ADD COLUMN title TEXT NOT NULL DEFAULT '';
`,
	// 4: no index by node key. Only DeleteByNode reads chunks by their
	// node (nothing in the pipeline calls it; it reads the client's
	// chunks instead), and the index took a page write of its own with
	// nearly every chunk written, its key at random in it (BENCHMARKS.md,
	// forty-sixth round).
	`DROP INDEX chunks_node;`,
}

// Store holds every client's chunks.
type Store struct {
	db *sqlitedb.DB

	mu      sync.Mutex
	indexes map[string]*vectors // per client
	tok     tokenizer
	lists   int // rows from which a client's vectors are in lists (SetVectorLists); 0: never
	common  int // directions search takes out of a query (SetCommonComponents)
	// resident: the process searches (Preload was called), so a new
	// client's index is kept loaded from its first write, as a preloaded
	// one is, instead of read whole at its first search.
	resident atomic.Bool
}

var (
	_ rag.Store      = (*Store)(nil)
	_ rag.QuerySpace = (*Store)(nil)
	// The optional interfaces search and bench ask for by assertion: a
	// signature that drifted would be passed over without a word.
	_ rag.TextGetter          = (*index)(nil)
	_ rag.SourceTexter        = (*index)(nil)
	_ rag.TermCounter         = (*index)(nil)
	_ rag.VectorSampler       = (*index)(nil)
	_ rag.ExactVectorSearcher = (*index)(nil)
)

// Open opens (creating when missing) the chunk database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: migrations})
	if err != nil {
		return nil, err
	}
	if err := dropFTS(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, indexes: map[string]*vectors{}}, nil
}

// dropFTS drops the FTS5 tables earlier versions kept per client (fts_,
// ftsv_, ftsi_, then fts2_ and fts2v_; FTS5's shadow tables go with
// their table): the chunks table holds everything a load reads. Then,
// once, VACUUM gives their pages back to the disk (228 of 1,128 MB of
// chunks.db at 583,209 chunks; SQLite would otherwise keep them free in
// the file, for its later writes).
func dropFTS(ctx context.Context, db *sqlitedb.DB) error {
	names, err := db.Strings(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'
		AND (name GLOB 'fts_*' OR name GLOB 'ftsv_*' OR name GLOB 'ftsi_*' OR name GLOB 'fts2_*' OR name GLOB 'fts2v_*')`)
	if err != nil || len(names) == 0 {
		return db.Explain("find old FTS tables", err)
	}
	err = db.Write(ctx, "drop old FTS tables", func(tx sqlitedb.Tx) error {
		for _, name := range names {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS "`+strings.ReplaceAll(name, `"`, `""`)+`"`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = db.W.ExecContext(ctx, `VACUUM`)
	return db.Explain("vacuum after dropping old FTS tables", err)
}

// SetVectorLists makes each client's vectors be kept in lists once it has
// minRows chunks (an inverted file, ivf.go: approximate, a tenth of the
// rows scanned a search); 0, the store's default, keeps every search
// exact (the configuration's rag.sqlite.vector_lists sets 100,000 unless
// told otherwise). Call it before the first search or write.
func (s *Store) SetVectorLists(minRows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = max(minRows, 0)
}

// SetCommonComponents implements rag.QuerySpace: the lists are made in the
// space of queries free of the k dominant directions of the client's
// vectors. Call it before the first search or write.
func (s *Store) SetCommonComponents(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.common = max(k, 0)
}

// Ping implements rag.Store.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// Close implements rag.Store.
func (s *Store) Close() error { return errors.Join(s.tok.close(), s.db.Close()) }

// For implements rag.Store. A client ID that could not name a table gives an
// Index whose every call fails with rag.ErrInvalid.
func (s *Store) For(client string) rag.Index {
	x := &index{s: s, client: client}
	x.err = rag.ValidateClient(client)
	return x
}

func (s *Store) vectorsOf(client string) *vectors {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.indexes[client]
	if v == nil {
		v = &vectors{gen: -1, q8: lists{minRows: s.lists, common: s.common}}
		s.indexes[client] = v
	}
	return v
}

type index struct {
	s      *Store
	client string
	err    error
}

// bump increments the client's generation in tx, adds delta to its chunk
// count, and returns the generation.
func (x *index) bump(ctx context.Context, tx sqlitedb.Tx, delta int) (int64, error) {
	var gen int64
	err := tx.QueryRowContext(ctx, `INSERT INTO generations (client, gen, chunks) VALUES (?, 1, ?)
		ON CONFLICT (client) DO UPDATE SET gen = gen + 1, chunks = chunks + excluded.chunks RETURNING gen`, x.client, delta).Scan(&gen)
	return gen, err
}

// sameDimension fails with rag.ErrInvalid when the client's chunks have
// vectors of another dimension than dim (id's): vectors of two embedders
// do not compare, and a search could not scan them as one index.
func (x *index) sameDimension(ctx context.Context, tx sqlitedb.Tx, id string, dim int) error {
	var size int
	err := tx.QueryRowContext(ctx, `SELECT length(vector) FROM chunks WHERE client = ? LIMIT 1`, x.client).Scan(&size)
	switch {
	case err == sql.ErrNoRows:
		return nil
	case err != nil:
		return err
	case size/4 != dim:
		return fmt.Errorf("%w: chunk %s vector: %d dimensions, the client's chunks have %d (embedded by another model? reprocess the client with a wipe)", rag.ErrInvalid, id, dim, size/4)
	}
	return nil
}

// Upsert implements rag.Index.
func (x *index) Upsert(ctx context.Context, chunks ...rag.Chunk) error {
	if x.err != nil {
		return x.err
	}
	if len(chunks) == 0 {
		return nil
	}
	dim, err := rag.ValidateBatch(chunks)
	if err != nil {
		return err
	}
	normalized := make([][]float32, len(chunks))
	for i, c := range chunks {
		normalized[i] = rag.Normalize(c.Vector)
	}
	v := x.s.vectorsOf(x.client)
	v.order.Lock()
	defer v.order.Unlock()
	if err := x.residentFromStart(ctx, v); err != nil {
		return err
	}
	var gen int64
	seqs := make([]int64, len(chunks))
	changed := make([]bool, len(chunks)) // new text: new postings
	err = x.s.db.Write(ctx, "upsert chunks", func(tx sqlitedb.Tx) error {
		if err := x.sameDimension(ctx, tx, chunks[0].ID, dim); err != nil {
			return err
		}
		added := 0
		for i, c := range chunks {
			refs := sqlitedb.JSONList(c.GraphRefs)
			// A new chunk (a first ingest: nearly all of them) is inserted
			// at once; one the client has is read and updated. Its seq is
			// the insert's rowid: with RETURNING seq, SQLite buffered the
			// row and database/sql built a result set for each chunk, a
			// third of the upsert's CPU on the dev mailing list
			// (BENCHMARKS.md, forty-eighth round).
			res, err := tx.ExecContext(ctx, `INSERT INTO chunks (client, id, text, title, graph_refs, source_urn, source_type, kind, node_key, ts, vector)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client, id) DO NOTHING`, x.client, c.ID, c.Text, c.Title, refs, c.SourceURN, c.SourceType, c.Kind, c.NodeKey,
				sqlitedb.Micros(c.Timestamp), encode(normalized[i]))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				if seqs[i], err = res.LastInsertId(); err != nil {
					return err
				}
				changed[i] = true
				added++
				continue
			}
			var old int64
			var oldText, oldTitle string
			if err := tx.QueryRowContext(ctx, `SELECT seq, text, title FROM chunks WHERE client = ? AND id = ?`, x.client, c.ID).Scan(&old, &oldText, &oldTitle); err != nil {
				return err
			}
			seqs[i] = old
			if _, err := tx.ExecContext(ctx, `UPDATE chunks SET text = ?, title = ?, graph_refs = ?, source_urn = ?, source_type = ?, kind = ?, node_key = ?, ts = ?, vector = ?
				WHERE seq = ?`, c.Text, c.Title, refs, c.SourceURN, c.SourceType, c.Kind, c.NodeKey, sqlitedb.Micros(c.Timestamp), encode(normalized[i]), old); err != nil {
				return err
			}
			changed[i] = oldText != c.Text || oldTitle != c.Title
		}
		var err error
		gen, err = x.bump(ctx, tx, added)
		return err
	})
	if err != nil {
		return err
	}
	// The in-memory index takes the write when it is loaded and holds
	// every earlier one (v.gen cannot move while the order is held): the
	// postings of the new texts and titles, tokenized as FTS5 does. An index
	// not loaded is read whole on its first search; nothing is tokenized
	// for it.
	v.mu.RLock()
	live := v.gen == gen-1
	v.mu.RUnlock()
	var texts []string
	for i, c := range chunks {
		if live && changed[i] {
			texts = append(texts, c.Title, c.Text)
		}
	}
	tokens, tokErr := x.s.tok.textTokens(ctx, texts)
	v.mu.Lock()
	defer v.mu.Unlock()
	if live && tokErr == nil {
		for i, c := range chunks {
			var terms map[string]float32
			var length int32
			if changed[i] {
				// Its length: its tokens, all columns (as FTS5's bm25() counts it)
				terms, length = termCounts(tokens[0], tokens[1]), int32(len(tokens[0])+len(tokens[1]))
				tokens = tokens[2:]
			}
			v.put(c, normalized[i], seqs[i], length, terms)
		}
		v.retrain()
		v.gen = gen
	} else {
		v.gen = -1 // someone else wrote in between: reload on next search
	}
	return nil
}

// residentFromStart loads a new client's index, still empty, in a
// process that searches (Store.resident) before its first write, so that
// the writes apply to it: otherwise the first search after a bulk import
// read every chunk written (18.8 CPU-s at 583,129, holding the index's
// lock) and then scanned every row while the lists trained. A client with
// chunks not loaded is left to its first search, as before, and its
// generation read once, not at every write; v.order held.
func (x *index) residentFromStart(ctx context.Context, v *vectors) error {
	if !x.s.resident.Load() || v.written {
		return nil
	}
	v.mu.RLock()
	loaded := v.gen >= 0
	v.mu.RUnlock()
	if loaded {
		return nil
	}
	gen, err := x.generation(ctx)
	if err != nil {
		return err
	}
	if gen != 0 {
		v.written = true
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return x.load(ctx, v)
}

const chunkColumns = `id, text, title, graph_refs, source_urn, source_type, kind, node_key, ts`

func scanChunk(rows *sql.Rows, withVector bool) (rag.Chunk, error) {
	var c rag.Chunk
	var refs string
	var ts int64
	dest := []any{&c.ID, &c.Text, &c.Title, &refs, &c.SourceURN, &c.SourceType, &c.Kind, &c.NodeKey, &ts}
	var vec []byte
	if withVector {
		dest = append(dest, &vec)
	}
	if err := rows.Scan(dest...); err != nil {
		return c, err
	}
	var err error
	if c.GraphRefs, err = sqlitedb.DecodeJSONList(refs); err != nil {
		return c, fmt.Errorf("chunk %s graph refs: %w", c.ID, err)
	}
	c.Timestamp = sqlitedb.Time(ts)
	if withVector {
		c.Vector = decode(vec)
	}
	return c, nil
}

// Get implements rag.Index.
func (x *index) Get(ctx context.Context, ids ...string) ([]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := x.s.db.Query(ctx, `SELECT `+chunkColumns+`, vector FROM chunks WHERE client = ? AND id IN (SELECT value FROM json_each(?))`, x.client, sqlitedb.JSONList(ids))
	if err != nil {
		return nil, x.s.db.Explain("get chunks", err)
	}
	defer rows.Close()
	byID := map[string]rag.Chunk{}
	for rows.Next() {
		c, err := scanChunk(rows, true)
		if err != nil {
			return nil, err
		}
		byID[c.ID] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]rag.Chunk, 0, len(byID))
	for _, id := range ids {
		if c, ok := byID[id]; ok {
			out = append(out, c)
			delete(byID, id)
		}
	}
	return out, nil
}

// Texts implements rag.TextGetter: what evidence and passages need,
// without the vectors and refs Get decodes.
func (x *index) Texts(ctx context.Context, ids ...string) (map[string]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	out := make(map[string]rag.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := x.s.db.Query(ctx, `SELECT id, text, title FROM chunks WHERE client = ? AND id IN (SELECT value FROM json_each(?))`, x.client, sqlitedb.JSONList(ids))
	if err != nil {
		return nil, x.s.db.Explain("chunk texts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c rag.Chunk
		if err := rows.Scan(&c.ID, &c.Text, &c.Title); err != nil {
			return nil, err
		}
		out[c.ID] = c
	}
	return out, rows.Err()
}

// SourceChunkIDs implements rag.Index.
func (x *index) SourceChunkIDs(ctx context.Context, sourceURN string) ([]string, error) {
	m, err := x.SourcesChunkIDs(ctx, []string{sourceURN})
	return m[sourceURN], err
}

// SourcesChunkIDs implements rag.Index.
func (x *index) SourcesChunkIDs(ctx context.Context, sourceURNs []string) (map[string][]string, error) {
	if x.err != nil {
		return nil, x.err
	}
	out := map[string][]string{}
	if len(sourceURNs) == 0 {
		return out, nil
	}
	// Not ORDER BY id: the planner would pick the (client, id) index and scan
	// every chunk of the client instead of (client, source_urn).
	rows, err := x.s.db.Query(ctx, `SELECT source_urn, id FROM chunks WHERE client = ? AND source_urn IN (SELECT value FROM json_each(?))`,
		x.client, sqlitedb.JSONList(sourceURNs))
	if err != nil {
		return nil, x.s.db.Explain("source chunks", err)
	}
	defer rows.Close()
	for rows.Next() {
		var urn, id string
		if err := rows.Scan(&urn, &id); err != nil {
			return nil, err
		}
		out[urn] = append(out[urn], id)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out, rows.Err()
}

// SourceTexts implements rag.SourceTexter.
func (x *index) SourceTexts(ctx context.Context, sourceURN string) ([]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	rows, err := x.s.db.Query(ctx, `SELECT id, text, title, kind FROM chunks WHERE client = ? AND source_urn = ?`, x.client, sourceURN)
	if err != nil {
		return nil, x.s.db.Explain("source texts", err)
	}
	defer rows.Close()
	var out []rag.Chunk
	for rows.Next() {
		c := rag.Chunk{SourceURN: sourceURN}
		if err := rows.Scan(&c.ID, &c.Text, &c.Title, &c.Kind); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b rag.Chunk) int { return strings.Compare(a.ID, b.ID) })
	return out, rows.Err()
}

// Delete implements rag.Index.
func (x *index) Delete(ctx context.Context, ids ...string) (int, error) {
	return x.deleteWhere(ctx, `id IN (SELECT value FROM json_each(?))`, sqlitedb.JSONList(ids))
}

// DeleteBySource implements rag.Index.
func (x *index) DeleteBySource(ctx context.Context, sourceURN string) (int, error) {
	return x.deleteWhere(ctx, `source_urn = ?`, sourceURN)
}

// DeleteByNode implements rag.Index. It reads the client's chunks: no
// index is kept by node key (migration 4).
func (x *index) DeleteByNode(ctx context.Context, nodeKey string) (int, error) {
	return x.deleteWhere(ctx, `node_key = ?`, nodeKey)
}

// Drop implements rag.Index.
func (x *index) Drop(ctx context.Context) error {
	_, err := x.deleteWhere(ctx, `client = ?`, x.client)
	return err
}

func (x *index) deleteWhere(ctx context.Context, where string, arg any) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	var ids []string
	var gen int64
	v := x.s.vectorsOf(x.client)
	v.order.Lock() // see vectors.order
	defer v.order.Unlock()
	err := x.s.db.Write(ctx, "delete chunks", func(tx sqlitedb.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, `SELECT seq, id FROM chunks WHERE client = ? AND `+where, x.client, arg)
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return err
			}
			seqs, ids = append(seqs, seq), append(ids, id)
		}
		rows.Close()
		for _, seq := range seqs {
			if _, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE seq = ?`, seq); err != nil {
				return err
			}
		}
		if len(seqs) == 0 {
			return nil
		}
		gen, err = x.bump(ctx, tx, -len(seqs))
		return err
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen == gen-1 {
		for _, id := range ids {
			v.remove(id)
		}
		v.retrain()
		v.gen = gen
	} else {
		v.gen = -1
	}
	return len(ids), nil
}

// Count implements rag.Index.
func (x *index) Count(ctx context.Context) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	var n int
	err := x.s.db.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE client = ?`, x.client).Scan(&n)
	return n, x.s.db.Explain("count chunks", err)
}

// BM25 implements rag.Index: the best chunks scored from the index's
// postings (bm25.go).
func (x *index) BM25(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	hits, err := x.keyword(ctx, q, v)
	seqs := v.complete(hits)
	v.mu.RUnlock()
	if err != nil || q.NoText {
		return hits, err
	}
	return x.withText(ctx, hits, seqs)
}

// keyword is BM25 without reading the texts or the metadata of the chunks
// (their IDs alone: vectors.complete reads the rest). Each query word is
// tokenized as FTS5 tokenizes it: nearly always one token, as query words
// are runs of letters and digits and so are FTS5's tokens. A word FTS5
// would split (a letter of a Unicode version newer than its tables) is
// searched as its tokens, each a term, as Lucene's query parser searches a
// word its analyzer splits; FTS5 took it as a phrase. v is the client's
// index, read-locked by the caller.
func (x *index) keyword(ctx context.Context, q rag.Query, v *vectors) ([]rag.Hit, error) {
	words := Terms(q.Text)
	if len(words) == 0 {
		return nil, nil
	}
	tokens, err := x.s.tok.tokens(ctx, words)
	if err != nil {
		return nil, fmt.Errorf("bm25: tokenize the query: %w", err)
	}
	var flat []string
	for _, i := range prune(len(words), func(i int) int { return v.wordFreq(tokens[i]) }, v.ids.len()) {
		flat = append(flat, tokens[i]...)
	}
	if len(flat) == 0 {
		return nil, nil
	}
	return v.bm25(q, flat, !rag.IsBackground(ctx)), nil
}

// DocFreqs implements rag.TermCounter, counting as keyword's pruning does
// (vectors.wordFreq).
func (x *index) DocFreqs(ctx context.Context, words []string) ([]int, int, error) {
	if x.err != nil {
		return nil, 0, x.err
	}
	tokens, err := x.s.tok.tokens(ctx, words)
	if err != nil {
		return nil, 0, fmt.Errorf("document frequencies: %w", err)
	}
	v, err := x.current(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer v.mu.RUnlock()
	counts := make([]int, len(words))
	for i := range words {
		counts[i] = v.wordFreq(tokens[i])
	}
	return counts, v.ids.len(), nil
}

// wordFreq is how many of the client's chunks hold a word whose FTS5
// tokens are toks (postings.docFreq): of a word of several tokens, the
// fewest any of them is in (at most as many hold them all); of one of
// none, 0. v is read-locked by the caller.
func (v *vectors) wordFreq(toks []string) int {
	if len(toks) == 0 {
		return 0
	}
	n := v.docFreq(toks[0])
	for _, t := range toks[1:] {
		n = min(n, v.docFreq(t))
	}
	return n
}

// Hybrid implements rag.Index.
func (x *index) Hybrid(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	kwq, vecq := q, q
	kwq.Limit, vecq.Limit = rag.SideCandidates(q.Limit, 1-q.Alpha), rag.SideCandidates(q.Limit, q.Alpha)
	// The two sides are independent: run them at once, on one read of the
	// index. Only the texts of the fused best are read.
	v, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	var kw, vec []rag.Hit
	var kwErr, vecErr error
	var wg sync.WaitGroup
	if q.Alpha < 1 {
		wg.Go(func() { kw, kwErr = x.keyword(ctx, kwq, v) })
	}
	if q.Alpha > 0 {
		vec, vecErr = v.nearVector(vecq, false)
	}
	wg.Wait()
	if err := errors.Join(kwErr, vecErr); err != nil {
		v.mu.RUnlock()
		return nil, err
	}
	fused := rag.Fuse(kw, vec, q.Alpha, q.Fusion, q.Limit) // copies what it keeps
	putHits(kw)
	putHits(vec)
	seqs := v.complete(fused)
	v.mu.RUnlock()
	if q.NoText {
		return fused, nil
	}
	return x.withText(ctx, fused, seqs)
}

// Terms returns the query words of text (rag.QueryWords): its distinct
// words (letters and digits, lower-cased) that are not stop words, at most
// rag.MaxQueryTerms.
func Terms(text string) []string { return rag.QueryWords(text, rag.MaxQueryTerms) }

// A query term is left out of BM25, when rarer terms remain, if it is in
// more than commonShare of the client's chunks and in at least commonFloor
// of them: its IDF is so low that it barely moves the ranking, while scoring
// its postings is most of the query's cost ("new", in 12% of 100,000
// chunks, cost 22 ms of a 32 ms query). The floor keeps small corpora, where
// every word is "common" and every posting list short, whole.
const (
	commonShare = 0.3
	commonFloor = 1000
)

// prune drops very common terms, keeping at least the rarest one, and
// returns the indexes of those kept, of n terms. docFreq(i) is how many of
// the client's chunks hold term i (vectors.wordFreq).
func prune(n int, docFreq func(i int) int, total int) []int {
	if n < 2 {
		return make([]int, n) // none, or the one
	}
	counts := make([]int, n)
	for i := range n {
		counts[i] = docFreq(i)
	}
	kept := make([]int, 0, n)
	rarest := 0
	for i := range n {
		if counts[i] < counts[rarest] {
			rarest = i
		}
		if counts[i] < commonFloor || float64(counts[i]) <= commonShare*float64(total) {
			kept = append(kept, i)
		}
	}
	if len(kept) == 0 {
		kept = append(kept, rarest)
	}
	return kept
}

func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decode(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
