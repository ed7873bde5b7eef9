// Package strtab keeps strings once each, by number, in memory the
// garbage collector does not scan.
//
// The in-memory indexes (the chunk index's metadata, the graph's node
// keys) name hundreds of thousands of strings. Held as strings of their
// own, with the maps and slices pointing at them, at 100,000 documents
// they were most of the heap's two million objects, which every
// collection marks while the searches it meets wait: a search's p99 was a
// collection's length. Here a string's bytes are in large blocks, and
// where each is, and the table finding a string's number, are slices of
// integers: a table of any size is a few objects without pointers to
// follow.
//
// A string's bytes are never written again once added, so Str returns
// them without a copy. Strings are not freed: a table holds every string
// added since it was made, and its owner makes a new one when it reloads.
package strtab

import (
	"hash/maphash"
	"unsafe"
)

// Table numbers strings from 0 in the order they are added. The zero
// Table is empty and ready. It is not safe for concurrent writes; reads
// (Find, Str, Len) may run concurrently with each other.
type Table struct {
	blocks [][]byte // the bytes; only the last has room
	at     []ref    // per number: where its bytes are
	hashes []uint64 // per number: its hash (growing slots hashes nothing again)
	slots  []uint32 // open addressing by hash: a number + 1; 0 is empty
	seed   maphash.Seed
	seeded bool
}

type ref struct{ block, off, n uint32 }

// blockSize is a block's size: a longer string has a block of its own.
const blockSize = 1 << 20

// Add returns s's number, adding a copy of s when it is new (added).
func (t *Table) Add(s string) (n uint32, added bool) {
	if !t.seeded {
		t.seed, t.seeded = maphash.MakeSeed(), true
	}
	h := maphash.String(t.seed, s)
	if n, ok := t.find(h, s); ok {
		return n, false
	}
	n = uint32(len(t.at))
	t.at = append(t.at, t.store(s))
	t.hashes = append(t.hashes, h)
	if 2*len(t.at) > len(t.slots) { // at most half full
		t.slots = make([]uint32, max(64, 2*len(t.slots)))
		for j, h := range t.hashes {
			t.place(h, uint32(j))
		}
	} else {
		t.place(h, n)
	}
	return n, true
}

// AddBytes is Add of b's bytes: a string is made only when b is new.
func (t *Table) AddBytes(b []byte) (n uint32, added bool) {
	return t.Add(unsafe.String(unsafe.SliceData(b), len(b))) // copied when kept
}

// Find returns s's number, if the table holds s.
func (t *Table) Find(s string) (uint32, bool) {
	if !t.seeded { // empty: nothing to find, and no seed to hash with yet
		return 0, false
	}
	return t.find(maphash.String(t.seed, s), s)
}

func (t *Table) find(h uint64, s string) (uint32, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		n := t.slots[i]
		if n == 0 {
			return 0, false
		}
		if t.hashes[n-1] == h && t.Str(n-1) == s {
			return n - 1, true
		}
	}
}

// place puts number n, of hash h, in the first empty slot from h's.
func (t *Table) place(h uint64, n uint32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = n + 1
}

// store copies s's bytes into the blocks.
func (t *Table) store(s string) ref {
	last := len(t.blocks) - 1
	if last < 0 || cap(t.blocks[last])-len(t.blocks[last]) < len(s) {
		t.blocks = append(t.blocks, make([]byte, 0, max(blockSize, len(s))))
		last++
	}
	b := t.blocks[last]
	t.blocks[last] = append(b, s...)
	return ref{uint32(last), uint32(len(b)), uint32(len(s))}
}

// Str is string number n (which must have been added), sharing the
// table's bytes.
func (t *Table) Str(n uint32) string {
	r := t.at[n]
	if r.n == 0 {
		return ""
	}
	return unsafe.String(&t.blocks[r.block][r.off], r.n)
}

// Len is how many strings the table holds.
func (t *Table) Len() int { return len(t.at) }
