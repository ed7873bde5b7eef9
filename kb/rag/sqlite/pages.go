package sqlite

// pages holds fixed-width int8 rows in pages of at most pageRows rows, so
// that adding a row never copies more than the last page. In one flat
// slice, every growth of the int8 rows and their residuals (about 210
// bytes a chunk) allocated the whole table again (a quarter larger, as
// append grows) while the old one was still in use: at 583,209 chunks
// 150 MB at once, which the collector counted as live and doubled into
// its next heap goal (BENCHMARKS.md, fifteenth round). Only the last page
// grows, by a quarter at a time, so that a small client's rows take what
// they need, and an index partitioned into lists (ivf.go), a last page
// growing in each, wastes little.
type pages struct {
	width int      // int8s a row
	n     int      // rows
	list  [][]int8 // each full page pageRows*width long; the last holds the rest
}

// pageRows is how many rows a page holds: a multiple of scanBlock, so
// that a scan's blocks from a page's start stay within it. At 112 int8s a
// row a full page is 448 KiB.
const pageRows = 16 * scanBlock

func newPages(width int) pages { return pages{width: width} }

// reserve makes room for n rows in all (a load knows how many it reads):
// full pages, and a last page of the rest's exact size.
func (p *pages) reserve(n int) {
	for have := len(p.list) * pageRows; have < n; have += pageRows {
		p.list = append(p.list, make([]int8, 0, min(n-have, pageRows)*p.width))
	}
}

// row is row i, width long.
func (p *pages) row(i int) []int8 {
	pg, off := p.list[i/pageRows], i%pageRows*p.width
	return pg[off : off+p.width : off+p.width]
}

// span is rows start to end (excluded), contiguous: they must be in one
// page (see pageEnd).
func (p *pages) span(start, end int) []int8 {
	return p.list[start/pageRows][start%pageRows*p.width : (end-1)%pageRows*p.width+p.width]
}

// pageEnd is the first row after row i's page.
func pageEnd(i int) int { return (i/pageRows + 1) * pageRows }

// add appends a row of zeros and returns it.
func (p *pages) add() []int8 {
	k := p.n / pageRows
	if k == len(p.list) {
		p.list = append(p.list, nil)
	}
	pg := p.list[k]
	if len(pg) == cap(pg) { // grows by a quarter, up to a full page
		rows := cap(pg) / p.width
		grown := make([]int8, len(pg), min(max(rows+rows/4, 16), pageRows)*p.width)
		copy(grown, pg)
		pg = grown
	}
	p.list[k] = pg[:len(pg)+p.width]
	p.n++
	r := p.row(p.n - 1)
	clear(r) // a row dropped by truncate and added again
	return r
}

// truncate keeps the first n rows, letting go of the pages past them.
func (p *pages) truncate(n int) {
	p.n = n
	keep := (n + pageRows - 1) / pageRows
	clear(p.list[keep:])
	p.list = p.list[:keep]
	if keep > 0 {
		p.list[keep-1] = p.list[keep-1][:(n-(keep-1)*pageRows)*p.width]
	}
}
