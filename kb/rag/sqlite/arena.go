package sqlite

import (
	"math/bits"
	"unsafe"
)

// arena keeps many growable slices of T (which holds no pointer) in large
// blocks: however many slices it holds, it is a few objects with nothing
// for the collector to follow. The BM25 postings are hundreds of
// thousands of slices (two per term), which as slices of their own, in a
// map keyed by strings of their own, were most of what each collection
// scanned while the searches it met waited.
//
// A slice is a part of a block (slot), with room to grow into. One that
// outgrows its room moves to a room a quarter or more larger, and its old
// room is kept for the next slice needing one of that size: rooms come in
// sizes four to a doubling (roomSize), each size with a list of rooms
// free. A room of a block or more is a block of its own, freed whole. A
// packed arena (pack) holds each slice in a room its exact size.
type arena[T any] struct {
	blocks [][]T
	top    int        // the next free element of the last shared block
	shared int        // the last shared block + 1 (0: none)
	free   [][]uint64 // per room size: rooms free, as block<<32 | offset
	spare  []uint32   // blocks of their own freed, reused for the next
	elems  int        // a shared block's length (0: arenaBytes of T)
}

// slot is a slice in an arena: n elements at off in block, room for room.
type slot struct{ block, off, n, room uint32 }

// arenaBytes is the size of an arena's shared blocks unless it sets
// elems: the zero arena is ready to use.
const arenaBytes = 1 << 20

// blockLen is a shared block's length in elements.
func (a *arena[T]) blockLen() int {
	if a.elems == 0 {
		var x T
		a.elems = arenaBytes / max(1, int(unsafe.Sizeof(x)))
	}
	return a.elems
}

// slice is s's elements, with s's room as its capacity: valid until the
// arena changes.
func (a *arena[T]) slice(s slot) []T {
	if s.room == 0 {
		return nil
	}
	return a.blocks[s.block][s.off : s.off+s.n : s.off+s.room]
}

// ensure makes room in s for more elements after its n, moving it when
// its room is too small.
func (a *arena[T]) ensure(s *slot, more int) {
	if int(s.n)+more <= int(s.room) {
		return
	}
	to := a.alloc(sizeClass(max(int(s.n)+more, int(s.room)+int(s.room)/4)))
	to.n = s.n
	copy(a.slice(to), a.slice(*s))
	a.release(*s)
	*s = to
}

// append adds xs after s's elements, growing it as needed.
func (a *arena[T]) append(s *slot, xs ...T) {
	a.ensure(s, len(xs))
	copy(a.blocks[s.block][s.off+s.n:], xs)
	s.n += uint32(len(xs))
}

// alloc returns an empty room of size class c.
func (a *arena[T]) alloc(c int) slot {
	size := roomSize(c)
	if c < len(a.free) {
		if f := a.free[c]; len(f) > 0 {
			at := f[len(f)-1]
			a.free[c] = f[:len(f)-1]
			return slot{block: uint32(at >> 32), off: uint32(at), room: uint32(size)}
		}
	}
	return a.room(size)
}

// room makes a new room of exactly size elements.
func (a *arena[T]) room(size int) slot {
	if size >= a.blockLen() { // a block of its own
		b := len(a.blocks)
		if n := len(a.spare); n > 0 {
			b, a.spare = int(a.spare[n-1]), a.spare[:n-1]
			a.blocks[b] = make([]T, size)
		} else {
			a.blocks = append(a.blocks, make([]T, size))
		}
		return slot{block: uint32(b), room: uint32(size)}
	}
	if a.shared == 0 || a.top+size > a.elems {
		a.keepRest()
		a.blocks = append(a.blocks, make([]T, a.elems))
		a.shared, a.top = len(a.blocks), 0
	}
	s := slot{block: uint32(a.shared - 1), off: uint32(a.top), room: uint32(size)}
	a.top += size
	return s
}

// keepRest lists what is left of the last shared block as free rooms.
func (a *arena[T]) keepRest() {
	for a.shared > 0 && a.elems-a.top >= roomSize(0) {
		c := floorClass(a.elems - a.top)
		a.release(slot{block: uint32(a.shared - 1), off: uint32(a.top), room: uint32(roomSize(c))})
		a.top += roomSize(c)
	}
}

// release frees s's room.
func (a *arena[T]) release(s slot) {
	switch {
	case s.room == 0:
	case int(s.room) >= a.blockLen():
		a.blocks[s.block] = nil
		a.spare = append(a.spare, s.block)
	case int(s.room) >= roomSize(0):
		c := floorClass(int(s.room))
		for len(a.free) <= c {
			a.free = append(a.free, nil)
		}
		a.free[c] = append(a.free[c], uint64(s.block)<<32|uint64(s.off))
	}
}

// packed copies s into a room its exact size in a (a new arena being
// packed).
func (a *arena[T]) packed(from *arena[T], s slot) slot {
	if s.n == 0 {
		return slot{}
	}
	to := a.room(int(s.n))
	to.n = s.n
	copy(a.slice(to), from.slice(s))
	return to
}

// Room sizes: four to a doubling, from 8 elements — 8, 10, 12, 14, 16,
// 20, 24, 28, 32, 40, … (class c is (4 + c%4) << (c/4 + 1)): a slice
// grown a quarter at a time takes about one size more each time, and
// leaves a room of its size free.
func roomSize(c int) int { return (4 + c%4) << (c/4 + 1) }

// sizeClass is the least class whose rooms hold n.
func sizeClass(n int) int {
	c := floorClass(max(n, roomSize(0)))
	if roomSize(c) < n {
		c++
	}
	return c
}

// floorClass is the largest class whose rooms fit in n (n ≥ 8).
func floorClass(n int) int {
	e := bits.Len(uint(n)) - 1 // 2^e ≤ n < 2^(e+1)
	quarter := (n >> (e - 2)) & 3
	return 4*(e-3) + quarter
}
