package rag_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/jervis-dev/jervis/kb/rag"
)

// Stem is a word's English Snowball stem, accents folded first; remembered
// or not (asked again, long words, from several goroutines at once), a
// word's stem is the same.
func TestStem(t *testing.T) {
	long := strings.Repeat("ab", 40) + "ing"
	cases := map[string]string{
		"crashes": "crash", "opening": "open", "expired": "expir", "tokens": "token",
		"crêpes": "crepe", "café": "cafe", "nullpointerexception": "nullpointerexcept", "1234": "1234",
		long: strings.Repeat("ab", 40),
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				for in, want := range cases {
					if got := rag.Stem(in); got != want {
						t.Errorf("Stem(%q) = %q, want %q", in, got, want)
					}
				}
			}
		})
	}
	wg.Wait()
}
