package sqlite

import (
	"encoding/binary"
	"math"
)

// postings is a client's BM25 inverted index in memory: for every FTS5
// token, the chunks holding it and how often. It is built with the
// vectors, by a load and by this process's writes alike, from the chunks'
// titles and texts tokenized with FTS5 itself (tokenizer.textTokens), so
// it holds what FTS5's index holds. A chunk's postings are tied to a document number that a new
// text replaces, so replaced and deleted postings are skipped until a
// compaction drops them. Each term's list is encoded (plist): about 3
// bytes a posting instead of 8.
type postings struct {
	terms   map[string]plist
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

// plist is a term's postings, in the order they were added: per posting
// the varint of its document number's difference from the one before
// (signed: a load adds them in row-id order), then the uvarint of its tf
// in quarters (columnWeights are whole).
type plist struct {
	data []byte
	last uint32 // the last posting's document number
	n    int32  // postings, live or not
}

const tfQuarters = 4

func (l *plist) add(p posting) {
	if cap(l.data)-len(l.data) < 2*binary.MaxVarintLen32 {
		// Grow by a quarter, not append's doubling: most lists are
		// short, and lists grown by writes are not fitted until a
		// compaction (a third of the postings' memory was spare).
		grown := make([]byte, len(l.data), len(l.data)+len(l.data)/4+2*binary.MaxVarintLen32)
		copy(grown, l.data)
		l.data = grown
	}
	l.data = binary.AppendVarint(l.data, int64(p.doc)-int64(l.last))
	l.data = binary.AppendUvarint(l.data, uint64(math.Round(float64(p.tf*tfQuarters))))
	l.last = p.doc
	l.n++
}

// fit drops the list's spare capacity once it has grown past an eighth.
func (l *plist) fit() {
	if cap(l.data)-len(l.data) > len(l.data)/8+8 {
		l.data = append([]byte(nil), l.data...)
	}
}

// cursor reads a plist's postings in order.
type cursor struct {
	data []byte
	doc  int64
}

func (l plist) cursor() cursor { return cursor{data: l.data} }

// next returns the next posting; ok is false at the end.
func (c *cursor) next() (p posting, ok bool) {
	if len(c.data) >= 2 && c.data[0]|c.data[1] < 0x80 {
		// Most postings are two bytes (a near document, a few
		// occurrences): decoded here as binary.Varint and Uvarint would.
		d := int64(c.data[0] >> 1)
		if c.data[0]&1 != 0 {
			d = ^d
		}
		c.doc += d
		tf := c.data[1]
		c.data = c.data[2:]
		return posting{uint32(c.doc), float32(tf) / tfQuarters}, true
	}
	if len(c.data) == 0 {
		return posting{}, false
	}
	d, n := binary.Varint(c.data)
	tf, m := binary.Uvarint(c.data[n:])
	c.data = c.data[n+m:]
	c.doc += d
	return posting{uint32(c.doc), float32(tf) / tfQuarters}, true
}

const noDoc = ^uint32(0)

// docFreq estimates how many live rows hold token: its postings, less the
// share of all postings that is dead (exact until a write replaces or
// deletes a chunk, and again after a compaction).
func (p *postings) docFreq(token string) int {
	n := float64(p.terms[token].n)
	if p.dead > 0 && p.entries > 0 {
		n *= 1 - float64(p.dead)/float64(p.entries)
	}
	return int(math.Round(n))
}

// index gives row i a new document number and the postings of terms (nil:
// none yet), killing the ones it had.
func (p *postings) index(i int, terms map[string]float32) {
	p.unindex(i)
	if p.terms == nil {
		p.terms = map[string]plist{}
	}
	doc := uint32(len(p.docRow))
	p.docRow = append(p.docRow, int32(i))
	p.docs[i] = doc
	for t, n := range terms {
		l := p.terms[t]
		l.add(posting{doc, n})
		p.terms[t] = l
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
		var live plist
		for c := list.cursor(); ; {
			e, ok := c.next()
			if !ok {
				break
			}
			if p.docRow[e.doc] >= 0 {
				live.add(e)
			}
		}
		if len(live.data) == 0 {
			delete(p.terms, t)
			continue
		}
		live.fit()
		p.terms[t] = live
	}
	p.entries -= p.dead
	p.dead = 0
}
