package sqlite

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Each size's class is the least whose rooms hold it, and a room's size is
// its own class's.
func TestRoomSizes(t *testing.T) {
	t.Parallel()
	for n := 1; n < 1<<20; n += 1 + n/64 {
		c := sizeClass(n)
		if roomSize(c) < n || c > 0 && roomSize(c-1) >= n {
			t.Fatalf("size %d: class %d of rooms of %d (the class below: %d)", n, c, roomSize(c), roomSize(c-1))
		}
		if floorClass(roomSize(c)) != c {
			t.Fatalf("room of %d: class %d, made as %d", roomSize(c), floorClass(roomSize(c)), c)
		}
		if f := floorClass(max(n, 8)); roomSize(f) > max(n, 8) || roomSize(f+1) <= max(n, 8) {
			t.Fatalf("%d: floor class %d of rooms of %d", n, f, roomSize(f))
		}
	}
}

// Slices in an arena hold what slices of their own would through random
// appends, moves and frees, packed or not; rooms freed are taken again, so
// that the blocks stay within twice the rooms in use, and a slice of a
// block or more, freed, gives its block back.
func TestArenaSlicesHoldTheirElements(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	a := arena[byte]{elems: 512}
	slots := make([]slot, 200)
	want := make([][]byte, len(slots))
	check := func(a *arena[byte], when string) {
		t.Helper()
		for i, s := range slots {
			if got := a.slice(s); !slices.Equal(got, want[i]) || len(got) != len(want[i]) {
				t.Fatalf("%s: slice %d holds %d elements, want %d", when, i, len(got), len(want[i]))
			}
		}
	}
	inBlocks := func(a *arena[byte]) int {
		n := 0
		for _, b := range a.blocks {
			n += len(b)
		}
		return n
	}
	for step := range 40_000 {
		i := r.IntN(len(slots))
		if r.IntN(50) == 0 { // freed, made again
			a.release(slots[i])
			slots[i], want[i] = slot{}, nil
			continue
		}
		more := make([]byte, 1+r.IntN(40))
		for j := range more {
			more[j] = byte(r.Uint32())
		}
		a.append(&slots[i], more...)
		want[i] = append(want[i], more...)
		if step%1000 == 0 {
			check(&a, "growing")
			rooms := 0
			for _, s := range slots {
				rooms += int(s.room)
			}
			if n := inBlocks(&a); n > 2*rooms+2*512 {
				t.Fatalf("step %d: %d elements in blocks for rooms of %d", step, n, rooms)
			}
		}
	}
	check(&a, "grown")
	var big slot
	a.append(&big, make([]byte, 700)...)
	if big.room < 512 || len(a.blocks[big.block]) != int(big.room) {
		t.Fatalf("a slice of 700 elements is not in a block of its own: %+v", big)
	}
	a.release(big)
	if a.blocks[big.block] != nil {
		t.Fatal("a freed block of its own is kept")
	}
	var again slot
	if a.append(&again, make([]byte, 600)...); again.block != big.block {
		t.Fatalf("the freed block %d is not taken again: %+v", big.block, again)
	}
	check(&a, "after blocks of their own")
	packed := arena[byte]{elems: 512}
	for i := range slots {
		slots[i] = packed.packed(&a, slots[i])
		if slots[i].room != slots[i].n {
			t.Fatalf("packed slice %d: room %d for %d", i, slots[i].room, slots[i].n)
		}
	}
	check(&packed, "packed")
}
