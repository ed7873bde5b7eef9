package sqlite

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Canonical UUIDs are kept as 16 bytes and read back as the same string;
// anything else (upper case, braces, a prefix, hyphens elsewhere, non-hex)
// is not one.
func TestParseUUID(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"00000000-0000-0000-0000-000000000000", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "ffffffff-ffff-ffff-ffff-ffffffffffff"} {
		u, ok := parseUUID(s)
		if !ok || u.String() != s {
			t.Errorf("%q: %v, read back %q", s, ok, u.String())
		}
	}
	for _, s := range []string{"", "c001", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0}",
		"urn:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg",
		"0f1e2d3-c4b5a-6978-8796-a5b4c3d2e1f0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f00"} {
		if _, ok := parseUUID(s); ok {
			t.Errorf("%q read as a UUID", s)
		}
	}
}

// rowIDs answers as a slice of strings and a map would, through random
// adds and removes of UUIDs alone and of UUIDs and other IDs mixed: each
// row's ID, each ID's row, and the order of rows by ID.
func TestRowIDsAsStrings(t *testing.T) {
	t.Parallel()
	for _, mixed := range []bool{false, true} {
		rowIDsAsStrings(t, mixed)
	}
}

func rowIDsAsStrings(t *testing.T, mixed bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r rowIDs
	var want []string
	newID := func() string {
		if mixed && rng.IntN(3) == 0 {
			return fmt.Sprintf("chunk-%d", rng.IntN(1000))
		}
		var u uuid16
		for i := range u {
			u[i] = byte(rng.IntN(256))
		}
		return u.String()
	}
	for step := range 5000 {
		if len(want) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(want))
			r.remove(i)
			want[i] = want[len(want)-1]
			want = want[:len(want)-1]
		} else if id := newID(); !slices.Contains(want, id) {
			r.add(id)
			want = append(want, id)
		}
		if r.len() != len(want) {
			t.Fatalf("mixed %v, step %d: %d rows, want %d", mixed, step, r.len(), len(want))
		}
		if step%250 != 0 {
			continue
		}
		for i, id := range want {
			if got := r.id(i); got != id {
				t.Fatalf("mixed %v, step %d: row %d is %q, want %q", mixed, step, i, got, id)
			}
			if j, ok := r.find(id); !ok || j != i {
				t.Fatalf("mixed %v, step %d: %q found at %d (%v), want %d", mixed, step, id, j, ok, i)
			}
			if j := rng.IntN(len(want)); cmp.Compare(want[i], want[j]) != r.compare(i, j) {
				t.Fatalf("mixed %v, step %d: rows %d and %d compare %d, their IDs %d", mixed, step, i, j, r.compare(i, j), cmp.Compare(want[i], want[j]))
			}
		}
		if _, ok := r.find(newID() + "x"); ok {
			t.Fatalf("mixed %v, step %d: an ID never added was found", mixed, step)
		}
	}
	if mixed != (len(r.odd) > 0) || len(r.pos) == 0 {
		t.Fatalf("mixed %v: %d odd IDs, %d UUIDs", mixed, len(r.odd), len(r.pos))
	}
}
