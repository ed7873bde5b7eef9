package eval

import (
	"math"
	"slices"
	"strings"
	"unicode"
)

// BM25 parameters of the textbook peer (Robertson–Spärck Jones, as Lucene
// sets them by default).
const (
	PeerK1 = 1.2
	PeerB  = 0.75
)

// peer is a textbook BM25 over whole documents: text lower-cased and split
// into runs of letters and digits, no stemming, no stop words, one field;
// idf = ln(1 + (N - n + 0.5) / (n + 0.5)).
type peer struct {
	ids      []string
	lengths  []float64
	avgLen   float64
	postings map[string][]posting
}

type posting struct {
	doc int
	tf  float64
}

// tokens splits text into lower-cased runs of letters and digits.
func tokens(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// newPeer indexes docs (id → text).
func newPeer(ids []string, text func(id string) string) *peer {
	p := &peer{ids: ids, lengths: make([]float64, len(ids)), postings: map[string][]posting{}}
	total := 0.0
	for i, id := range ids {
		tf := map[string]float64{}
		ts := tokens(text(id))
		for _, tok := range ts {
			tf[tok]++
		}
		p.lengths[i] = float64(len(ts))
		total += p.lengths[i]
		for tok, n := range tf {
			p.postings[tok] = append(p.postings[tok], posting{doc: i, tf: n})
		}
	}
	if len(ids) > 0 {
		p.avgLen = total / float64(len(ids))
	}
	return p
}

// search returns the ids of the best documents for query, best first, at
// most limit of them, leaving out skip.
func (p *peer) search(query string, limit int, skip string) []string {
	scores := map[int]float64{}
	n := float64(len(p.ids))
	seen := map[string]bool{}
	for _, tok := range tokens(query) {
		if seen[tok] {
			continue // a repeated query term counts once
		}
		seen[tok] = true
		ps := p.postings[tok]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, x := range ps {
			norm := x.tf + PeerK1*(1-PeerB+PeerB*p.lengths[x.doc]/p.avgLen)
			scores[x.doc] += idf * x.tf * (PeerK1 + 1) / norm
		}
	}
	docs := make([]int, 0, len(scores))
	for d := range scores {
		if p.ids[d] != skip {
			docs = append(docs, d)
		}
	}
	slices.SortFunc(docs, func(a, b int) int {
		if scores[a] != scores[b] {
			if scores[a] > scores[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(p.ids[a], p.ids[b])
	})
	out := make([]string, 0, min(limit, len(docs)))
	for _, d := range docs[:min(limit, len(docs))] {
		out = append(out, p.ids[d])
	}
	return out
}
