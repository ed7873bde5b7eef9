package sqlite

import (
	"encoding/binary"
	"math"

	"github.com/jervis-dev/jervis/internal/strtab"
)

// postings is a client's BM25 inverted index in memory: for every FTS5
// token, the chunks holding it and how often. It is built with the
// vectors, by a load and by this process's writes alike, from the chunks'
// titles and texts tokenized with FTS5 itself (tokenizer.textTokens), so
// it holds what FTS5's index holds. A chunk's postings are tied to a document number that a new
// text replaces, so replaced and deleted postings are skipped until a
// compaction drops them. Each term's list is encoded (plist): about 3
// bytes a posting instead of 8.
//
// The terms are numbered in a strtab.Table, and every list's bytes and
// block headers are in two arenas: the whole index is a few objects
// without pointers. As a map of strings to lists with slices of their own
// (at 583,209 chunks, 197,000 terms), it was most of what each collection
// scanned, and the one-client p99 was a collection's length.
type postings struct {
	vocab   strtab.Table // the terms, by number
	lists   []plist      // by term number
	bytes   arena[byte]  // the lists' postings
	heads   arena[pblock]
	docs    []uint32 // per row: its document number
	nterms  []int32  // per row: how many postings it has
	docRow  []int32  // per document number: its row, or -1
	docLen  []int32  // per document number: its row's length in tokens
	entries int      // postings held, live or not
	dead    int      // of which dead
}

type posting struct {
	doc uint32
	tf  float32 // occurrences, weighted by column (columnWeights)
}

// plist is a term's postings, in the order they were added, which is
// the order of their document numbers (index numbers documents as it
// meets them): per posting the varint of its document number's difference
// from the one before, then the uvarint of its tf in quarters
// (columnWeights are whole).
//
// Every postingBlock postings close a block, whose header (pblock) says
// where it ends, its last document and a bound on what any of its
// postings can score (its largest tf, its shortest row): a search skips
// whole blocks of a list it only needs at a few documents, and a window of
// documents where a term cannot score much is not read for it (bm25).
// The open block's bound is kept in the list itself.
//
// A plist is kept in postings, its data and blocks in postings' arenas
// (list reads them as a postingList).
type plist struct {
	data   slot // the postings, in postings.bytes
	blocks slot // the closed blocks, in postings.heads
	listHead
}

// listHead is what a list keeps beside its postings and blocks.
type listHead struct {
	last   uint32  // the last posting's document number
	n      int32   // postings, live or not
	maxTF  float32 // the open block's largest tf
	minLen int32   // and shortest row
}

// postingList is a plist as a search reads it: its data and closed
// blocks are slices of the arenas, valid while the index does not change.
type postingList struct {
	data   []byte
	blocks []pblock
	listHead
}

// list returns token's postings; ok is false when no live or dead
// posting holds it.
func (p *postings) list(token string) (l postingList, ok bool) {
	t, ok := p.vocab.Find(token)
	if !ok || p.lists[t].n == 0 {
		return l, false
	}
	r := &p.lists[t]
	return postingList{data: p.bytes.slice(r.data), blocks: p.heads.slice(r.blocks), listHead: r.listHead}, true
}

// pblock is a closed block of a plist.
type pblock struct {
	last   uint32 // its last posting's document number
	end    uint32 // where its postings end in data
	maxTF  float32
	minLen int32
}

// postingBlock is how many postings a block holds: Lucene's block size.
const postingBlock = 128

const tfQuarters = 4

// add appends e, a posting of a row of length tokens, to term t's list;
// e.doc is past every document the list holds. The list grows by a
// quarter at a time, not append's doubling (arena.ensure): most lists are
// short, and lists grown by writes are not packed until a compaction (a
// third of the postings' memory was spare).
func (p *postings) add(t uint32, e posting, length int32) {
	l := &p.lists[t]
	p.bytes.ensure(&l.data, 2*binary.MaxVarintLen32)
	data := p.bytes.slice(l.data)
	data = binary.AppendVarint(data, int64(e.doc)-int64(l.last))
	data = binary.AppendUvarint(data, uint64(math.Round(float64(e.tf*tfQuarters))))
	l.data.n = uint32(len(data)) // within the room ensured
	l.last = e.doc
	p.count(l, e.tf, length)
}

// count counts a posting of tf in a row of length tokens in l's open
// block, and closes the block when it is full.
func (p *postings) count(l *plist, tf float32, length int32) {
	if l.n%postingBlock == 0 {
		l.maxTF, l.minLen = tf, length
	} else {
		l.maxTF, l.minLen = max(l.maxTF, tf), min(l.minLen, length)
	}
	l.n++
	if l.n%postingBlock == 0 {
		p.heads.append(&l.blocks, pblock{last: l.last, end: l.data.n, maxTF: l.maxTF, minLen: l.minLen})
	}
}

// term returns token's number, making it an empty list when it is new.
func (p *postings) term(token string) uint32 {
	t, added := p.vocab.Add(token)
	if added {
		p.lists = append(p.lists, plist{})
	}
	return t
}

// pack copies every list to a room its exact size in new arenas (after a
// load, and a compaction).
func (p *postings) pack() {
	var bytes arena[byte]
	var heads arena[pblock]
	for t := range p.lists {
		l := &p.lists[t]
		l.data, l.blocks = bytes.packed(&p.bytes, l.data), heads.packed(&p.heads, l.blocks)
	}
	p.bytes, p.heads = bytes, heads
}

// cursor reads a plist's postings in order.
type cursor struct {
	data []byte
	doc  int64
}

func (l *postingList) cursor() cursor { return cursor{data: l.data} }

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
	var n float64
	if t, ok := p.vocab.Find(token); ok {
		n = float64(p.lists[t].n)
	}
	if p.dead > 0 && p.entries > 0 {
		n *= 1 - float64(p.dead)/float64(p.entries)
	}
	return int(math.Round(n))
}

// index gives row i, of length tokens, a new document number and the
// postings of terms (nil: none yet), killing the ones it had.
func (p *postings) index(i int, terms map[string]float32, length int32) {
	p.unindex(i)
	doc := uint32(len(p.docRow))
	p.docRow, p.docLen = append(p.docRow, int32(i)), append(p.docLen, length)
	p.docs[i] = doc
	for t, n := range terms {
		p.add(p.term(t), posting{doc, n}, length)
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
	old := *p
	p.bytes, p.heads = arena[byte]{}, arena[pblock]{}
	for t := range p.lists {
		l := &p.lists[t]
		c := cursor{data: old.bytes.slice(l.data)}
		*l = plist{}
		for {
			e, ok := c.next()
			if !ok {
				break
			}
			if p.docRow[e.doc] >= 0 {
				p.add(uint32(t), e, p.docLen[e.doc])
			}
		}
	}
	p.pack()
	p.entries -= p.dead
	p.dead = 0
}

// seeker reads a plist in document order and skips to a document by its
// blocks: at is the posting it stands on (doc noDoc past the end), the
// read-th of the list.
type seeker struct {
	l    *postingList
	c    cursor
	read int
	at   posting
}

func (l *postingList) seek() *seeker {
	s := &seeker{l: l, c: l.cursor(), read: -1}
	s.next()
	return s
}

// next moves to the next posting.
func (s *seeker) next() {
	p, ok := s.c.next()
	if !ok {
		p.doc = noDoc
	}
	s.at = p
	s.read++
}

// block is the block at belongs to (len(l.blocks): the open one).
func (s *seeker) block() int { return s.read / postingBlock }

// lastOf is block b's last document.
func (s *seeker) lastOf(b int) uint32 {
	if b < len(s.l.blocks) {
		return s.l.blocks[b].last
	}
	return s.l.last
}

// advance moves to the first posting of a document at or past doc.
func (s *seeker) advance(doc uint32) {
	if s.at.doc >= doc {
		return
	}
	if b := s.block(); b < len(s.l.blocks) && s.l.blocks[b].last < doc {
		// Skip the blocks that end before doc without reading them.
		for b < len(s.l.blocks) && s.l.blocks[b].last < doc {
			b++
		}
		prev := s.l.blocks[b-1]
		s.c = cursor{data: s.l.data[prev.end:], doc: int64(prev.last)}
		s.read = b*postingBlock - 1
		s.next()
	}
	for s.at.doc < doc {
		s.next()
	}
}

// bound calls f with the largest tf and the shortest row of each block
// that may hold postings of documents before hi, from the one being read,
// and returns the largest of f's results (0: none).
func (s *seeker) bound(hi uint32, f func(tf float32, length int32) float64) float64 {
	if s.at.doc >= hi {
		return 0
	}
	var best float64
	for b := s.block(); b <= len(s.l.blocks); b++ {
		if b > s.block() && s.lastOf(b-1) >= hi-1 {
			break
		}
		tf, length := s.l.maxTF, s.l.minLen
		if b < len(s.l.blocks) {
			tf, length = s.l.blocks[b].maxTF, s.l.blocks[b].minLen
		}
		best = max(best, f(tf, length))
	}
	return best
}
