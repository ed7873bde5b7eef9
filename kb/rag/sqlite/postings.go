package sqlite

import (
	"context"
	"database/sql"
)

// postings is a client's BM25 inverted index in memory: for every FTS5
// token, the chunks holding it and how often. It is loaded from FTS5's own
// index (the 'instance' vocabulary) with the vectors and kept up to date by
// this process's writes, which tokenize new text with FTS5 itself
// (tokenizer). A chunk's postings are tied to a document number that a new
// text replaces, so replaced and deleted postings are skipped until a
// compaction drops them.
type postings struct {
	terms   map[string][]posting
	docs    []uint32 // per row: its document number
	nterms  []int32  // per row: how many postings it has
	docRow  []int32  // per document number: its row, or -1
	entries int      // postings held, live or not
	dead    int      // of which dead
}

type posting struct {
	doc uint32
	tf  float32 // occurrences, weighted by column (columnWeights)
}

const noDoc = ^uint32(0)

// index gives row i a new document number and the postings of terms (nil:
// none yet), killing the ones it had.
func (p *postings) index(i int, terms map[string]float32) {
	p.unindex(i)
	if p.terms == nil {
		p.terms = map[string][]posting{}
	}
	doc := uint32(len(p.docRow))
	p.docRow = append(p.docRow, int32(i))
	p.docs[i] = doc
	for t, n := range terms {
		p.terms[t] = append(p.terms[t], posting{doc, n})
	}
	p.nterms[i] = int32(len(terms))
	p.entries += len(terms)
}

// unindex kills row i's postings.
func (p *postings) unindex(i int) {
	if d := p.docs[i]; d != noDoc {
		p.docRow[d] = -1
		p.dead += int(p.nterms[i])
		p.docs[i], p.nterms[i] = noDoc, 0
	}
}

// compact drops dead postings once they are half of all.
func (p *postings) compact() {
	if p.dead < 4096 || p.dead*2 < p.entries {
		return
	}
	for t, list := range p.terms {
		live := list[:0]
		for _, e := range list {
			if p.docRow[e.doc] >= 0 {
				live = append(live, e)
			}
		}
		if len(live) == 0 {
			delete(p.terms, t)
			continue
		}
		p.terms[t] = live
	}
	p.entries -= p.dead
	p.dead = 0
}

// loadPostings reads the client's whole FTS5 index (one row per token
// instance, ordered by token and chunk) into v, whose rows are loaded.
func (x *index) loadPostings(ctx context.Context, tx *sql.Tx, v *vectors) error {
	rows, err := tx.QueryContext(ctx, `SELECT term, doc, col FROM `+x.instances())
	if err != nil {
		return err
	}
	defer rows.Close()
	var term, col, last string
	var seq, lastSeq int64 = 0, -1
	var tf float32
	weight := func(col string) float32 {
		if col == "title" {
			return columnWeights[0]
		}
		return columnWeights[1]
	}
	flush := func() {
		if lastSeq < 0 {
			return
		}
		if i, ok := v.bySeq[lastSeq]; ok {
			v.terms[last] = append(v.terms[last], posting{v.docs[i], tf})
			v.nterms[i]++
			v.entries++
		}
	}
	if v.terms == nil {
		v.terms = map[string][]posting{}
	}
	for rows.Next() {
		if err := rows.Scan(&term, &seq, &col); err != nil {
			return err
		}
		if term == last && seq == lastSeq {
			tf += weight(col)
			continue
		}
		flush()
		last, lastSeq, tf = term, seq, weight(col)
	}
	flush()
	return rows.Err()
}
