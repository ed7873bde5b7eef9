package git

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"slices"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// sniffLen is how far into a file git looks for a NUL byte to call it
// binary (xdiff-interface.c; go-git's binary.IsBinary).
const sniffLen = 8000

// The work of counting one file's changed lines is bounded: a minimal-diff
// search over a piece of the file takes at most searchSteps steps (past
// them the counts come from patience diff's anchors instead), and all of a
// file's searches and anchors at most fileSteps. One hostile file cannot
// stall an import.
const (
	searchSteps = 5_000_000
	fileSteps   = 50_000_000
)

// diffStat is what `git show --stat` counts for a commit: each file it
// changed against its first parent (all of them for a root commit), with
// the lines added and deleted; renames are found as go-git's tree diff
// finds them. Binary files and submodules are left out. The counts are a
// minimal line diff's.
//
// go-git's Commit.Stats gives the same list, but builds the whole patch: it
// reads each file twice (once to see whether it is binary) and runs a
// character diff library over the lines. That was 57 % of a repository
// import's CPU; this is the same list from one read of each file and a
// diff that only counts (its counts minimal where go-git's shortcuts were
// not, near-minimal past the budget).
func diffStat(ctx context.Context, c *object.Commit) ([]File, error) {
	to, err := c.Tree()
	if err != nil {
		return nil, err
	}
	from := &object.Tree{}
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, err
		}
		if from, err = p.Tree(); err != nil {
			return nil, err
		}
	}
	changes, err := object.DiffTreeWithOptions(ctx, from, to, object.DefaultDiffTreeOptions)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, b, err := ch.Files()
		if err != nil {
			return nil, err
		}
		if a == nil && b == nil {
			continue // not a file: a submodule
		}
		ac, err := contents(a)
		if err != nil {
			return nil, err
		}
		bc, err := contents(b)
		if err != nil {
			return nil, err
		}
		if binary(ac) || binary(bc) || len(ac) == 0 && len(bc) == 0 {
			continue
		}
		f := File{}
		switch {
		case a == nil:
			f.Path = ch.To.Name
		case b == nil:
			f.Path = ch.From.Name
		case ch.From.Name != ch.To.Name:
			f.Path = ch.From.Name + " => " + ch.To.Name
		default:
			f.Path = ch.From.Name
		}
		f.Deletions, f.Additions = lineChanges(ac, bc)
		files = append(files, f)
	}
	return files, nil
}

// contents reads a file of a tree whole (nothing for none).
func contents(f *object.File) ([]byte, error) {
	if f == nil {
		return nil, nil
	}
	r, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// binary is git's test: a NUL byte in the first sniffLen bytes.
func binary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), sniffLen)], 0) >= 0
}

// lineChanges counts the lines a line diff deletes from a and adds to make
// b. A line is its text up to and including its "\n" (the last may have
// none), so a changed final newline changes that line.
//
// Only the counts are wanted, and they follow from the length L of a
// common subsequence of lines: deleted = len(a) - L, added = len(b) - L.
// Every line that does not occur in the other side at all cannot be common:
// those are counted at once and dropped. What is left goes to
// commonLength, which finds the longest L (a minimal diff) within its
// budget, and a near-longest one past it.
func lineChanges(a, b []byte) (deleted, added int) {
	a, b = trimCommonLines(a, b)
	ids := map[string]int32{}
	x, y := lineIDs(a, ids), lineIDs(b, ids)
	in := make([]uint8, len(ids)) // bit 1: in x, bit 2: in y
	for _, id := range x {
		in[id] |= 1
	}
	for _, id := range y {
		in[id] |= 2
	}
	keep := func(s []int32) []int32 {
		out := make([]int32, 0, len(s))
		for _, id := range s {
			if in[id] == 3 {
				out = append(out, id)
			}
		}
		return out
	}
	budget := fileSteps
	common := commonLength(keep(x), keep(y), &budget)
	return len(x) - common, len(y) - common
}

// trimCommonLines drops the lines a and b begin with and end with alike,
// found on their bytes: most of a changed file, and cheaper than the lines'
// numbering.
func trimCommonLines(a, b []byte) ([]byte, []byte) {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	n = bytes.LastIndexByte(a[:n], '\n') + 1 // back to a line's start
	a, b = a[n:], b[n:]
	n = 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	// The common end starts after a "\n" of it, a line's start in both.
	if i := bytes.IndexByte(a[len(a)-n:], '\n'); i >= 0 {
		n -= i + 1
	} else {
		n = 0
	}
	return a[:len(a)-n], b[:len(b)-n]
}

// lineIDs numbers s's lines, the same line the same number in ids.
func lineIDs(s []byte, ids map[string]int32) []int32 {
	out := make([]int32, 0, bytes.Count(s, []byte{'\n'})+1)
	for len(s) > 0 {
		n := bytes.IndexByte(s, '\n') + 1
		if n == 0 {
			n = len(s)
		}
		id, ok := ids[string(s[:n])]
		if !ok {
			id = int32(len(ids))
			ids[string(s[:n])] = id
		}
		out = append(out, id)
		s = s[n:]
	}
	return out
}

// commonLength is the length of a common subsequence of x and y: the
// longest, found by Myers's O(ND) search (1986) after the common prefix and
// suffix are taken, when that search ends within searchSteps (and what is
// left of budget, which it spends). Past that (a large file much
// rewritten, or lines reshuffled), it is what patience diff finds: the
// lines that occur once in each side, in the longest run that keeps their
// order on both, split x and y into pieces taken the same way in turn,
// while budget lasts. A piece with no such line, or one reached once the
// budget is spent, counts nothing common: an upper bound on the changes, as
// git's own diff settles for a heuristic on such files.
func commonLength(x, y []int32, budget *int) int {
	i := 0
	for i < len(x) && i < len(y) && x[i] == y[i] {
		i++
	}
	x, y = x[i:], y[i:]
	j := 0
	for j < len(x) && j < len(y) && x[len(x)-1-j] == y[len(y)-1-j] {
		j++
	}
	x, y = x[:len(x)-j], y[:len(y)-j]
	if d, ok := editDistance(x, y, budget); ok {
		return i + j + (len(x)+len(y)-d)/2
	}
	*budget -= len(x) + len(y) // the anchors' work
	anchors := uniqueAnchors(x, y)
	common := i + j + len(anchors)
	if *budget <= 0 || len(anchors) == 0 {
		return common
	}
	px, py := 0, 0
	for _, a := range anchors {
		common += commonLength(x[px:a[0]], y[py:a[1]], budget)
		px, py = a[0]+1, a[1]+1
	}
	return common + commonLength(x[px:], y[py:], budget)
}

// editDistance is the number of deletions and insertions of a shortest
// edit script from x to y (Myers's greedy forward search, linear space),
// its steps taken from budget; false when that takes more than
// searchSteps or than budget has.
func editDistance(x, y []int32, budget *int) (int, bool) {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		return n + m, true
	}
	limit := n + m
	off := limit + 1
	v := make([]int, 2*limit+3) // v[off+k]: the furthest x reached on diagonal k
	most := min(*budget, searchSteps)
	steps := 0
	defer func() { *budget -= steps }()
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var i int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				i = v[off+k+1] // down: an insertion
			} else {
				i = v[off+k-1] + 1 // right: a deletion
			}
			j := i - k
			start := i
			for i < n && j < m && x[i] == y[j] {
				i++
				j++
			}
			steps += 1 + i - start
			v[off+k] = i
			if i >= n && j >= m {
				return d, true
			}
		}
		if steps > most {
			return 0, false
		}
	}
	return limit, true
}

// uniqueAnchors are patience diff's anchors: the (x, y) positions of the
// lines that occur exactly once in x and once in y, the longest run of
// them increasing in both.
func uniqueAnchors(x, y []int32) [][2]int {
	type seen struct{ nx, ny, py int }
	count := map[int32]*seen{}
	for _, id := range x {
		if c := count[id]; c != nil {
			c.nx++
		} else {
			count[id] = &seen{nx: 1}
		}
	}
	for p, id := range y {
		if c := count[id]; c != nil {
			c.ny++
			c.py = p
		}
	}
	var pairs [][2]int
	for p, id := range x {
		if c := count[id]; c.nx == 1 && c.ny == 1 {
			pairs = append(pairs, [2]int{p, c.py})
		}
	}
	// The longest increasing run of y positions (patience sorting).
	tops := []int{}                 // tops[l]: the pair ending the best run of length l+1
	prev := make([]int, len(pairs)) // the pair before it in its run
	for k, p := range pairs {
		l, _ := slices.BinarySearchFunc(tops, p[1], func(t, py int) int { return cmp.Compare(pairs[t][1], py) })
		prev[k] = -1
		if l > 0 {
			prev[k] = tops[l-1]
		}
		if l == len(tops) {
			tops = append(tops, k)
		} else {
			tops[l] = k
		}
	}
	if len(tops) == 0 {
		return nil
	}
	run := make([][2]int, len(tops))
	for k, l := tops[len(tops)-1], len(tops)-1; l >= 0; k, l = prev[k], l-1 {
		run[l] = pairs[k]
	}
	return run
}
