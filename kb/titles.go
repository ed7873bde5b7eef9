package kb

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/jervis-dev/jervis/kb/rag"
)

// Title agreement: the items a search ranks are ranked again by how much
// of the query their titles hold (an issue's summary, a mail's subject),
// and the two rankings are fused by rank (reciprocal rank, fusionK), the
// title ranking weighted TitleWeight. BM25 reads a title as a field of
// each of its item's chunks, among the chunk's other words; a title that
// holds the query in other forms of its words, and little else, is what a
// reporter of the same problem writes (Bugzilla's "possible duplicates" on
// a new bug are found by the summary alone).
//
// The best titleKeep items stand: the search, with its feedback, ranks them
// by more than their titles, and title agreement reorders what follows.
//
// Measured on the duplicates of the dev Jira corpus (kb/eval, Jira + Git,
// embedded, recall@10 / MRR@10; without it 0.764 / 0.500): weight 0.3
// 0.777 / 0.513, 0.4 0.791 / 0.514, 0.5 0.804 / 0.514, 0.6 0.797 / 0.516,
// 0.7 0.784 / 0.512, 1 0.730 / 0.499; the best 2 kept (0 or 1: 0.804 /
// 0.467, 3: 0.804 / 0.505); without stemming 0.770 / 0.508; the query's
// words weighed by their IDF among the client's chunks rather than the
// embedder's general weights 0.784 / 0.505, and with CommonShare's cut
// 0.764 / 0.499 (most words of a title are common in its own project).
// Jira alone 0.743 / 0.487 → 0.784 / 0.496. Chosen on the dev corpus: the
// weight and the items kept (BENCHMARKS.md, twenty-fifth round).
const (
	// TitleWeight weighs the title ranking against the search's own.
	TitleWeight = 0.5
	// titleKeep is how many of the best items title agreement leaves in
	// place.
	titleKeep = 2
)

// titleAgreement ranks items again by how much of the query their titles
// hold (titleScores) and fuses that ranking with theirs (see TitleWeight),
// scoring each item by the fused score. Items, their order and scores are
// left as they are when the query has no telling word, no title holds
// one, or there are too few items to reorder.
func titleAgreement(query string, items []Item, weigh func(string) float64) []Item {
	if len(items) <= titleKeep+1 {
		return items
	}
	agree := titleScores(query, items, weigh)
	if slices.Max(append(agree, 0)) == 0 {
		return items // no title holds a word of the query
	}
	byTitle := make([]int, len(items)) // item numbers, best title first
	for i := range byTitle {
		byTitle[i] = i
	}
	slices.SortStableFunc(byTitle, func(a, b int) int { return cmp.Compare(agree[b], agree[a]) })
	fused := make([]float64, len(items))
	for r, i := range byTitle {
		if i < titleKeep {
			r = 0 // kept: as if its title agreed best, above every other item
		}
		fused[i] = 1/float64(fusionK+i+1) + TitleWeight/float64(fusionK+r+1)
	}
	order := byTitle // reused: the item numbers, by fused score
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(fused[b], fused[a]) })
	out := make([]Item, len(items))
	for r, i := range order {
		out[r] = items[i]
		out[r].Score = fused[i]
	}
	return out
}

// titleScores is how much of the query each item's title holds, 0 to 1
// (nil when the query has no telling word). A title holds a query word
// when it has a word of the same stem (rag.Stem); the query's words
// (rag.QueryWords, telling) weigh as weigh says (the embedder's general
// word weights; nil: 1 each). An item's agreement is the weight its title
// holds over the query's whole weight plus, for each of the title's words
// the query lacks, the query's average word: of two titles holding the
// same query words, the shorter agrees more.
func titleScores(query string, items []Item, weigh func(string) float64) []float64 {
	var stems []string // the query's, distinct
	var weights []float64
	var all float64
	for _, w := range rag.QueryWords(query, rag.MaxQueryTerms) {
		s := rag.Stem(w)
		if slices.Contains(stems, s) || !telling(w) {
			continue
		}
		x := 1.0
		if weigh != nil {
			x = weigh(w)
		}
		stems, weights, all = append(stems, s), append(weights, x), all+x
	}
	if all <= 0 {
		return nil
	}
	avg := all / float64(len(stems))
	want, ofTitles := titleStems(stems, items)
	agree := make([]float64, len(items))
	for i, title := range ofTitles {
		var held, other float64
		for _, s := range title {
			if at := slices.Index(want, s); at >= 0 {
				held += weights[at]
			} else {
				other += avg
			}
		}
		agree[i] = held / (all + other)
	}
	return agree
}

// titleStems returns the numbers of the query's stems (-1: in no title
// yet) and of each item's title's distinct telling stems (rag.Stem). A
// title's stems never change, and a search asks for a hundred titles,
// most of them asked for before: up to titleCacheSize titles' stems are
// remembered, numbered (then the memory starts afresh). Stemming each
// title's words again was most of the title ranking's time (0.3 ms a
// search on the dev Jira corpus), and comparing them as strings most of
// what was left.
func titleStems(query []string, items []Item) (want []int32, ofTitles [][]int32) {
	want, ofTitles = make([]int32, len(query)), make([][]int32, len(items))
	titles.Lock()
	defer titles.Unlock()
	if titles.known == nil || len(titles.known)+len(items) > titleCacheSize {
		titles.known, titles.stems = make(map[string][]int32), make(map[string]int32)
	}
	for i, it := range items {
		nums, ok := titles.known[it.Title]
		if !ok {
			for _, w := range rag.Words(it.Title) {
				if !telling(w) {
					continue
				}
				s := rag.Stem(w)
				n, ok := titles.stems[s]
				if !ok {
					n = int32(len(titles.stems))
					titles.stems[s] = n
				}
				if !slices.Contains(nums, n) {
					nums = append(nums, n)
				}
			}
			// A copy: the title may share its bytes with a chunk's text.
			titles.known[strings.Clone(it.Title)] = nums
		}
		ofTitles[i] = nums
	}
	for i, s := range query {
		if n, ok := titles.stems[s]; ok {
			want[i] = n
		} else {
			want[i] = -1
		}
	}
	return want, ofTitles
}

// titleCacheSize is how many titles' stems are remembered (a few MiB).
const titleCacheSize = 50_000

var titles struct {
	sync.Mutex
	known map[string][]int32 // a title's stems, by number
	stems map[string]int32   // the stems' numbers
}
