package strtab

import (
	"fmt"
	"strings"
	"testing"
)

// Every string keeps its number and its text however many are added after
// it — past many growths of the slots and several blocks, one longer than
// a block —, a string added again gets its number back, and a string never
// added is not found.
func TestStringsKeepTheirNumbersAndText(t *testing.T) {
	t.Parallel()
	var tab Table
	if _, ok := tab.Find("x"); ok {
		t.Fatal("an empty table found a string")
	}
	long := strings.Repeat("y", blockSize+3)
	var want []string
	for i := range 150_000 {
		s := fmt.Sprintf("issue:TIMOB-%d", i)
		switch i {
		case 0:
			s = ""
		case 70_000:
			s = long
		}
		n, added := tab.Add(s)
		if !added || int(n) != len(want) {
			t.Fatalf("%q: number %d added %v, want %d added", s, n, added, len(want))
		}
		want = append(want, s)
	}
	if len(tab.blocks) < 3 {
		t.Fatalf("%d blocks: the test meant several", len(tab.blocks))
	}
	if tab.Len() != len(want) {
		t.Fatalf("Len %d, want %d", tab.Len(), len(want))
	}
	for i, s := range want {
		if got := tab.Str(uint32(i)); got != s {
			t.Fatalf("number %d is %.20q, want %.20q", i, got, s)
		}
		if n, ok := tab.Find(s); !ok || int(n) != i {
			t.Fatalf("Find %.20q: %d %v, want %d", s, n, ok, i)
		}
		if n, added := tab.Add(strings.Clone(s)); added || int(n) != i {
			t.Fatalf("Add again %.20q: %d added %v, want %d", s, n, added, i)
		}
	}
	for _, s := range []string{"issue:TIMOB-150000", "issue:TIMOB-", long[1:]} {
		if n, ok := tab.Find(s); ok {
			t.Fatalf("Find %.20q: %d, never added", s, n)
		}
	}
}

// A string added from bytes is the table's copy: changing the bytes after
// changes nothing, and a string read before more were added still reads
// the same.
func TestAddedBytesAreCopied(t *testing.T) {
	t.Parallel()
	var tab Table
	b := []byte("person:ana")
	n, _ := tab.AddBytes(b)
	first := tab.Str(n)
	copy(b, "person:bob") // the caller's buffer, reused for the next name
	for i := range 1000 {
		tab.Add(fmt.Sprint("k", i))
	}
	if first != "person:ana" || tab.Str(n) != "person:ana" {
		t.Fatalf("the string added from bytes reads %q, then %q", first, tab.Str(n))
	}
	if m, added := tab.AddBytes([]byte("person:ana")); added || m != n {
		t.Fatalf("the same bytes again: %d added %v, want %d", m, added, n)
	}
	if _, added := tab.AddBytes(nil); !added || tab.Str(uint32(tab.Len()-1)) != "" {
		t.Fatal("no bytes are not the empty string")
	}
}
