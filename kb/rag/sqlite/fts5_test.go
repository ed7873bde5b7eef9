package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/rag"
)

// The BM25 scored in Go is checked against FTS5's own: an oracle table,
// contentless FTS5 with the tokenizer the postings follow (tokenizerSpec)
// and bm25() weighing the columns as columnWeights, holding the client's
// chunks as they are when it is made. The store itself keeps no FTS5
// table (see the package comment).

// ftsOracle makes (again) the oracle table of x's client from its chunks
// now, with its 'row' vocabulary, and returns the table's quoted name.
func ftsOracle(t *testing.T, x *index) string {
	t.Helper()
	ctx := t.Context()
	table, vocab := `"oracle_`+x.client+`"`, `"oraclev_`+x.client+`"`
	err := x.s.db.Write(ctx, "oracle", func(tx sqlitedb.Tx) error {
		for _, stmt := range []string{
			`DROP TABLE IF EXISTS ` + vocab,
			`DROP TABLE IF EXISTS ` + table,
			`CREATE VIRTUAL TABLE ` + table + ` USING fts5(title, text, content='', contentless_delete=1, tokenize='` + tokenizerSpec + `')`,
			fmt.Sprintf(`INSERT INTO %s(%s, rank) VALUES ('rank', 'bm25(%g, %g)')`, table, table, columnWeights[0], columnWeights[1]),
			`CREATE VIRTUAL TABLE ` + vocab + ` USING fts5vocab(` + table + `, 'row')`,
		} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (rowid, title, text) SELECT seq, title, text FROM chunks WHERE client = ?`, x.client)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// ftsDocFreq is how many rows of the oracle table of x's client hold
// token, from its vocabulary.
func ftsDocFreq(t *testing.T, x *index, token string) int {
	t.Helper()
	var n int
	err := x.s.db.QueryRow(t.Context(), `SELECT doc FROM "oraclev_`+x.client+`" WHERE term = ?`, token).Scan(&n)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return n
}

// bm25SQL ranks the client's chunks for words (each quoted, OR-ed, as
// one FTS5 query) with FTS5's bm25() over the oracle table t.
func (x *index) bm25SQL(ctx context.Context, t string, q rag.Query, words []string) ([]rag.Hit, error) {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = `"` + w + `"`
	}
	match := strings.Join(quoted, " OR ")
	cond, args := filterSQL(q.Filter)
	var rows *sql.Rows
	var err error
	if cond == "" {
		// The FTS table is the client's own: rank it alone, then fetch only
		// the top rows (joining every match first costs a lookup per match).
		rows, err = x.s.db.Query(ctx, `SELECT c.id, c.text, c.title, c.graph_refs, c.source_urn, c.source_type, c.kind, c.node_key, c.ts, -top.rank
			FROM (SELECT rowid, rank FROM `+t+` WHERE `+t+` MATCH ? ORDER BY rank LIMIT ?) top
			CROSS JOIN chunks c ON c.seq = top.rowid ORDER BY top.rank`, match, q.Limit)
	} else {
		rows, err = x.s.db.Query(ctx, `SELECT c.id, c.text, c.title, c.graph_refs, c.source_urn, c.source_type, c.kind, c.node_key, c.ts, -`+rank(t)+`
			FROM `+t+` JOIN chunks c ON c.seq = `+t+`.rowid
			WHERE `+t+` MATCH ? AND c.client = ?`+cond+` ORDER BY `+rank(t)+` LIMIT ?`, append(append([]any{match, x.client}, args...), q.Limit)...)
	}
	if err != nil {
		return nil, x.s.db.Explain("bm25", err)
	}
	defer rows.Close()
	var hits []rag.Hit
	for rows.Next() {
		var h rag.Hit
		var refs string
		var ts int64
		if err := rows.Scan(&h.Chunk.ID, &h.Chunk.Text, &h.Chunk.Title, &refs, &h.Chunk.SourceURN, &h.Chunk.SourceType, &h.Chunk.Kind, &h.Chunk.NodeKey, &ts, &h.BM25Score); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(refs), &h.Chunk.GraphRefs); err != nil {
			return nil, err
		}
		h.Chunk.Timestamp = sqlitedb.Time(ts)
		h.Score = h.BM25Score
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// filterSQL renders f as conditions on chunks aliased c.
func filterSQL(f rag.Filter) (string, []any) {
	var conds []string
	var args []any
	in := func(col string, vals []string) {
		if len(vals) > 0 {
			b, _ := json.Marshal(vals)
			conds = append(conds, col+` IN (SELECT value FROM json_each(?))`)
			args = append(args, string(b))
		}
	}
	in("c.source_type", f.SourceTypes)
	in("c.kind", f.Kinds)
	if f.SourceURN != "" {
		conds = append(conds, "c.source_urn = ?")
		args = append(args, f.SourceURN)
	}
	if !f.Since.IsZero() {
		conds = append(conds, "c.ts >= ?")
		args = append(args, sqlitedb.Micros(f.Since))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "c.ts < ?")
		args = append(args, sqlitedb.Micros(f.Until))
	}
	if len(f.NodeTypes) > 0 {
		b, _ := json.Marshal(f.NodeTypes)
		conds = append(conds, `EXISTS (SELECT 1 FROM json_each(c.graph_refs) r WHERE substr(r.value, 1, instr(r.value, ':') - 1) IN (SELECT value FROM json_each(?)))`)
		args = append(args, string(b))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(conds, " AND "), args
}

// rank is bm25() of table t with the column weights.
func rank(t string) string {
	return fmt.Sprintf("bm25(%s, %g, %g)", t, columnWeights[0], columnWeights[1])
}
