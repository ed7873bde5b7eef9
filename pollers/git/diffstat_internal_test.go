package git

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// lcs is the textbook dynamic program: the length of a longest common
// subsequence of x and y.
func lcs(x, y []int32) int {
	prev, cur := make([]int, len(y)+1), make([]int, len(y)+1)
	for i := range x {
		for j := range y {
			if x[i] == y[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(y)]
}

// TestLineChangesAreMinimal: within the budget the counts are a minimal
// diff's (the longest common subsequence's) on random texts with many
// repeated lines; past it they are never below the minimum, and still
// find the common lines that patience diff's anchors reach.
func TestLineChangesAreMinimal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n, alphabet int) ([]byte, []int32) {
		// Line i is "x" repeated ids[i] times: lines share their bytes'
		// beginnings, as real lines do.
		var b strings.Builder
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(rng.IntN(alphabet))
			b.WriteString(strings.Repeat("x", int(ids[i])) + "\n")
		}
		s := b.String()
		if n > 0 && ids[n-1] > 0 && rng.IntN(3) == 0 { // no newline at the end: another line
			s = s[:len(s)-1]
			ids[n-1] += 1000
		}
		return []byte(s), ids
	}
	for range 2000 {
		a, x := text(rng.IntN(60), 1+rng.IntN(12))
		b, y := text(rng.IntN(60), 1+rng.IntN(12))
		l := lcs(x, y)
		del, add := lineChanges(a, b)
		if del != len(x)-l || add != len(y)-l {
			t.Fatalf("-%d +%d, want -%d +%d", del, add, len(x)-l, len(y)-l)
		}
		if budget := 5; commonLength(x, y, &budget) > l {
			t.Fatalf("over the budget: more common lines than the longest %d", l)
		}
	}
	// Past the budget: unique lines reshuffled in blocks are still found.
	var x, y []int32
	for i := range 400 {
		x = append(x, int32(i))
	}
	y = append(append(y, x[200:]...), x[:200]...)
	if budget := 10; commonLength(x, y, &budget) != 200 {
		t.Errorf("blocks swapped past the budget: not the 200 common lines")
	}
	// Hostile: 200,000 lines of ten kinds, reshuffled, a unique line every
	// hundred. The work stays within the budget (and one search past it).
	x, y = nil, nil
	for i := range 200_000 {
		x = append(x, int32(rng.IntN(10)))
		y = append(y, int32(rng.IntN(10)))
		if i%100 == 0 {
			x, y = append(x, int32(1000+i)), append(y, int32(1000+i))
		}
	}
	budget := 10_000_000
	if got := commonLength(x, y, &budget); got < 2000 || got > lcsBound(x, y) {
		t.Errorf("hostile: %d common lines, want the 2,000 anchors at least", got)
	}
	if budget > 0 || budget < -searchSteps-2*len(x) {
		t.Errorf("hostile: budget left %d, want it spent and not far past", budget)
	}
	for _, c := range []struct{ a, b string }{{"", ""}, {"a\nb", "a\nb\n"}, {"a\n", ""}, {"", "a\nb"}} {
		del, add := lineChanges([]byte(c.a), []byte(c.b))
		want := map[[2]string][2]int{{"", ""}: {0, 0}, {"a\nb", "a\nb\n"}: {1, 1}, {"a\n", ""}: {1, 0}, {"", "a\nb"}: {0, 2}}[[2]string{c.a, c.b}]
		if [2]int{del, add} != want {
			t.Errorf("%q → %q: -%d +%d, want -%d +%d", c.a, c.b, del, add, want[0], want[1])
		}
	}
}

// lcsBound is an upper bound on the longest common subsequence: the
// lines both sides have, counted with their multiplicity.
func lcsBound(x, y []int32) int {
	count := map[int32]int{}
	for _, id := range x {
		count[id]++
	}
	n := 0
	for _, id := range y {
		if count[id] > 0 {
			count[id]--
			n++
		}
	}
	return n
}
