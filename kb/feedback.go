package kb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/kb/rag"
)

// Feedback (pseudo-relevance feedback, as RM3 and Lucene's "more like
// this" do it): a query is a few words, the item that matches them best
// says in many more words what they are about. Search ranks items by the
// query, reads the best item's text, searches again by that item's most
// telling words (FeedbackQuery) and fuses the two item rankings by rank.
// Items that share the best item's subject in other words come up; an item
// the query alone ranks high stays high.
//
// Measured on the duplicates of the dev Jira corpus (kb/eval; see the
// README's table). A best item that holds too little of the query feeds
// nothing back (FeedbackCoverage).
const (
	// FeedbackTerms is how many words the feedback query takes: as many as
	// a keyword query searches by. With words weighed by the client's own
	// counts (KB.rarity), recall@10 / MRR@10 on the dev corpus: embedded,
	// Jira + Git, 32 0.669 / 0.432, 24 0.676 / 0.439 (Jira alone both
	// 0.676 / 0.435, 16 0.649 / 0.399); Jira in Weaviate 32 0.655–0.669 /
	// 0.385–0.387 (three runs), 24 0.642–0.649 / 0.401–0.402 (two): 32
	// keeps both backends a tenth ahead of the BM25 peer. 24 would spend
	// 15 % less in feedback at 100,000 documents (BENCHMARKS.md).
	FeedbackTerms = rag.MaxQueryTerms
	// feedbackWeight weighs the feedback ranking against the query's own in
	// the rank fusion (on the dev corpus, Jira + Git, recall@10 / MRR@10:
	// 1 0.635 / 0.399 at 30 terms, 1.5 0.662 / 0.403, 2 0.669 / 0.396).
	feedbackWeight = 1.5
	// fusionK is the rank fusion's constant (reciprocal rank fusion, k=60).
	fusionK = 60
	// FeedbackCoverage is how much of the query (its words weighed by
	// rarity) the best item must hold for its words to be searched by:
	// a best item that matches one common word of the query is not what
	// the query is about, and searching by its words would bury the items
	// that are (testdata/search, one relevant item per query, lost three of
	// 27 from the top five without it).
	FeedbackCoverage = 0.75
	// feedbackPoolShare: the feedback search ranks a quarter as many
	// passages as the query's own (55 for the 11 items the eval asks
	// for). Its items fuse with the query's by rank, and a deep one still
	// gains about as much as the query's own tenth item holds, so a long
	// feedback ranking carries in items that are like the best one only
	// in passing. On the dev corpus (Jira + Git, embedded, recall@10 /
	// MRR@10), feedback pools of 200 passages (the query's, until
	// 2026-11-26) 0.669 / 0.436, 100 0.676 / 0.438, 55 (a quarter) 0.689
	// / 0.440, 50 0.696 / 0.435, 30 0.689 / 0.430, 20 0.703 / 0.435; Jira
	// in Weaviate 200 0.676 / 0.371, 50 0.676 / 0.381. Fewer passages are
	// also a higher floor for the pruning: at 583,209 chunks feedback's
	// p99 was 20–22 ms with 200, 11 with 50 (BENCHMARKS.md, nineteenth
	// round). Chosen on the dev corpus: a quarter (of the five tried).
	feedbackPoolShare = 4
	// CommonShare: a word more than this share of the client's chunks
	// hold is too common to say what an item is about, and is left out of
	// the words an item is searched by (feedback, similar items), as
	// Lucene's MoreLikeThis leaves out words above its maxDocFreqPct. An
	// item's repeated common words (a project's name, a platform, a
	// template's words) took places in its 32 words that its rare ones
	// now take, and their long posting lists were most of what feedback
	// scored. On the dev corpus (Jira + Git, embedded; recall@10 / MRR@10
	// of search, then of similar items), no cut 0.689 / 0.440, 0.682 /
	// 0.467; 2 % 0.696 / 0.440, 0.703 / 0.478; 1 % 0.736 / 0.457, 0.703
	// / 0.485; 0.5 % 0.764 / 0.500, 0.757 / 0.500; 0.2 % 0.743 / 0.503,
	// 0.743 / 0.516. Chosen on the dev corpus: 0.5 % (of the five tried).
	// At 583,209 chunks feedback's p50 went from 3.7 to about 1 ms
	// (BENCHMARKS.md, twenty-first round).
	CommonShare = 0.005
	// commonFloor: a word no more than this many chunks hold is never too
	// common. In a small index a share is a handful of chunks, as many as
	// one item's own: a client's first few thousand chunks weigh their
	// words by rarity alone (IDF), as before CommonShare.
	commonFloor = 100
)

// FeedbackQuery returns the words of an item's title and text that say
// what it is about, as a keyword query: each distinct word (letters and
// digits, lower-cased, two characters or more, not a stop word) scored by
// how often the item uses it times how rare it is (weigh, KB.rarity; nil:
// every word weighs 1), the best n, best first (first seen first among
// equals). A word weighed 0 or less is too common to tell and is left out.
func FeedbackQuery(title, text string, n int, weigh func(string) float64) string {
	type word struct {
		w     string
		count int
		first int
	}
	counts := map[string]*word{}
	var words []*word
	for i, w := range rag.Words(title + "\n" + text) {
		if !telling(w) {
			continue
		}
		c, ok := counts[w]
		if !ok {
			c = &word{w: w, first: i}
			counts[w] = c
			words = append(words, c)
		}
		c.count++
	}
	score := func(c *word) float64 {
		if weigh == nil {
			return float64(c.count)
		}
		return float64(c.count) * weigh(c.w)
	}
	slices.SortStableFunc(words, func(a, b *word) int { return cmp.Compare(score(b), score(a)) })
	out := make([]string, 0, min(n, len(words)))
	for _, c := range words {
		if len(out) == n {
			break
		}
		if weigh != nil && weigh(c.w) <= 0 {
			continue
		}
		out = append(out, c.w)
	}
	return strings.Join(out, " ")
}

// telling reports whether a word may say what an item is about: two
// characters or more, not a stop word.
func telling(w string) bool { return len(w) >= 2 && !rag.StopWord(w) }

// Coverage is the share of query's words (rag.QueryWords, each weighed by
// weigh; nil: 1) that text holds (as words, lower-cased).
func Coverage(query, text string, weigh func(string) float64) float64 {
	words := rag.QueryWords(query, rag.MaxQueryTerms)
	if len(words) == 0 {
		return 0
	}
	in := make(map[string]bool, len(words))
	for _, w := range words {
		in[w] = false
	}
	for _, w := range rag.Words(text) {
		if _, ok := in[w]; ok {
			in[w] = true
		}
	}
	var held, all float64
	for _, w := range words {
		x := 1.0
		if weigh != nil {
			x = weigh(w)
		}
		all += x
		if in[w] {
			held += x
		}
	}
	if all == 0 {
		return 0
	}
	return held / all
}

// feedback re-ranks items (ranked by the query q, best first) by fusing
// their ranks with those of a search by the best item's FeedbackQuery. It
// returns the fused ranking, each item scored by its fused score, and the
// feedback query ("" when there was nothing to search by).
func (k *KB) feedback(ctx context.Context, client string, q rag.Query, items []Item) ([]Item, string, error) {
	if len(items) == 0 {
		return items, "", nil
	}
	index := k.chunks.For(client)
	chunks, err := rag.SourceChunks(ctx, index, items[0].SourceURN)
	if err != nil {
		return nil, "", fmt.Errorf("feedback: %w", err)
	}
	var title string
	var text strings.Builder
	for _, c := range chunks {
		if c.Kind == KindLink {
			continue // an excerpt of the item's own text
		}
		title = cmp.Or(title, c.Title)
		text.WriteString(c.Text)
		text.WriteByte('\n')
	}
	if Coverage(q.Text, title+"\n"+text.String(), k.weigh) < FeedbackCoverage {
		return items, "", nil
	}
	weigh, err := k.rarity(ctx, index, title+"\n"+text.String())
	if err != nil {
		return nil, "", fmt.Errorf("feedback: %w", err)
	}
	fq := FeedbackQuery(title, text.String(), FeedbackTerms, weigh)
	if fq == "" {
		return items, "", nil
	}
	hits, err := index.BM25(ctx, rag.Query{Text: fq, Limit: max(1, q.Limit/feedbackPoolShare), Filter: q.Filter, NoText: true})
	if err != nil {
		return nil, "", fmt.Errorf("feedback: %w", err)
	}
	if !slices.Contains(q.Filter.Kinds, KindLink) {
		hits = slices.DeleteFunc(hits, isLinkContext)
	}
	return fuseItems(items, rankItems(hits, len(hits))), fq, nil
}

// rarity returns how a query built from text weighs its words: by how
// rare each is among the client's own chunks (BM25's IDF, from the index's
// counts, as Lucene's "more like this" weighs them) when the index counts
// them (rag.TermCounter), 0 for a word too common to tell (CommonShare),
// else by the embedder's general word weights.
// On the dev Jira corpus's duplicates (the client's counts against the
// general weights): search recall@10 / MRR@10 0.655 / 0.417 → 0.676 /
// 0.435, similar items 0.635 / 0.398 → 0.689 / 0.457; the general weights
// times the client's IDF did no better (0.676 / 0.434). A word common in
// this client's corpus (a project's name, a template's words) is what
// general weights miss, and its long posting list was most of feedback's
// cost at 100,000 documents.
func (k *KB) rarity(ctx context.Context, index rag.Index, text string) (func(string) float64, error) {
	tc, ok := index.(rag.TermCounter)
	if !ok {
		return k.weigh, nil
	}
	seen := map[string]bool{}
	var words []string
	for _, w := range rag.Words(text) {
		if telling(w) && !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	counts, total, err := tc.DocFreqs(ctx, words)
	if err != nil {
		return nil, err
	}
	idf := make(map[string]float64, len(words))
	common := max(CommonShare*float64(total), commonFloor)
	for i, w := range words {
		df := float64(min(counts[i], total)) // a kept count may be a little stale
		if df > common {
			idf[w] = 0
			continue
		}
		idf[w] = math.Log(1 + (float64(total)-df+0.5)/(df+0.5))
	}
	return func(w string) float64 { return idf[w] }, nil
}

// fuseItems fuses two item rankings by reciprocal rank (the second
// weighted feedbackWeight): an item in both keeps the first ranking's
// passages; ties keep the first ranking's order.
func fuseItems(first, second []Item) []Item {
	score := make(map[string]float64, len(first)+len(second))
	at := make(map[string]int, len(first)+len(second))
	out := make([]Item, 0, len(first)+len(second))
	for i, it := range first {
		score[it.SourceURN] += 1 / float64(fusionK+i+1)
		at[it.SourceURN] = len(out)
		out = append(out, it)
	}
	for i, it := range second {
		score[it.SourceURN] += feedbackWeight / float64(fusionK+i+1)
		if _, ok := at[it.SourceURN]; !ok {
			at[it.SourceURN] = len(out)
			out = append(out, it)
		}
	}
	for i := range out {
		out[i].Score = score[out[i].SourceURN]
	}
	slices.SortStableFunc(out, func(a, b Item) int { return cmp.Compare(b.Score, a.Score) })
	return out
}
