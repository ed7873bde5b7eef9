package sqlite

import (
	"slices"
	"testing"
)

// Rows in pages read back as written across page boundaries, through
// removals (truncate) and additions after them, and a load's reserve
// allocates exactly the rows it is told.
func TestPagesKeepRowsAcrossPages(t *testing.T) {
	t.Parallel()
	const width = 5
	fill := func(r []int8, i int) {
		for j := range r {
			r[j] = int8(i*7 + j)
		}
	}
	p := newPages(width)
	var want [][]int8 // the rows as written
	add := func(i int) {
		r := p.add()
		if len(r) != width || slices.ContainsFunc(r, func(x int8) bool { return x != 0 }) {
			t.Fatalf("row %d added as %v: not %d zeros", i, r, width)
		}
		fill(r, i)
		want = append(want, slices.Clone(r))
	}
	check := func(when string) {
		t.Helper()
		if p.n != len(want) {
			t.Fatalf("%s: %d rows, want %d", when, p.n, len(want))
		}
		for i, w := range want {
			if got := p.row(i); !slices.Equal(got, w) {
				t.Fatalf("%s: row %d = %v, want %v", when, i, got, w)
			}
		}
		// Spans from any row to its page's end (or the last row) are the
		// rows one after another.
		for _, start := range []int{0, 1, pageRows - 1, pageRows, pageRows + 3, 2 * pageRows} {
			if start >= p.n {
				continue
			}
			end := min(pageEnd(start), p.n)
			if got, w := p.span(start, end), slices.Concat(want[start:end]...); !slices.Equal(got, w) {
				t.Fatalf("%s: span %d..%d differs from its rows", when, start, end)
			}
		}
		used, _ := p.size()
		if used != p.n*width {
			t.Fatalf("%s: %d int8s used for %d rows", when, used, p.n)
		}
	}
	for i := range 2*pageRows + pageRows/2 {
		add(i)
	}
	check("added")
	if len(p.list) != 3 {
		t.Fatalf("%d pages for 2.5 pages of rows", len(p.list))
	}
	for _, n := range []int{2*pageRows + 1, 2 * pageRows, pageRows + 17, 0} {
		p.truncate(n)
		want = want[:n]
		check("truncated")
		for i := range 40 { // added again: zeros, then written
			add(1000 + n + i)
		}
		check("added after truncating")
	}

	r := newPages(width)
	r.reserve(pageRows + 300)
	for i := range pageRows + 300 {
		fill(r.add(), i)
	}
	if used, allocated := r.size(); used != allocated || len(r.list) != 2 {
		t.Fatalf("reserved for %d rows: %d of %d int8s used in %d pages", pageRows+300, used, allocated, len(r.list))
	}
}

// size is the int8s the rows hold, and those allocated for them.
func (p *pages) size() (used, allocated int) {
	for _, pg := range p.list {
		used, allocated = used+len(pg), allocated+cap(pg)
	}
	return used, allocated
}
