package kb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
)

// ErrNotIndexed means the item asked about has no chunks (yet): it was
// never qualified, or was quarantined.
var ErrNotIndexed = errors.New("not indexed")

// SimilarRequest asks for the items most like one item, the whole item
// being the query.
type SimilarRequest struct {
	Client string
	// SourceURN is the item's (its chunks' sourceUrn): it is left out of
	// the results, and its own score is what similarities are relative to.
	SourceURN string
	Title     string // the item's title
	Text      string // the item's text (its body)
	Limit     int    // items (default 10, at most rag.MaxLimit)
	// Filter narrows the candidates. Excerpts of items and reports on them
	// (KindLink, KindResult) are never candidates.
	Filter rag.Filter
}

// SimilarResult is the items most like one item.
type SimilarResult struct {
	SourceURN string `json:"sourceUrn"`
	// Node is the item's own node.
	Node string `json:"node,omitempty"`
	// Query is the words the item was searched by.
	Query string `json:"query"`
	// Self is the item's own best passages for that query, the side of it
	// the similar items matched.
	Self []Passage `json:"self"`
	// Items are the similar items, most similar first; an item's Score is
	// its similarity (see Similar), its NodeKeys start with its own node.
	Items   []Item             `json:"items"`
	Timings map[string]float64 `json:"timingsMs"`
}

// similarTitleTerms are how many of a query's words the title may take;
// the rest of rag.MaxQueryTerms go to the body's most repeated words.
const similarTitleTerms = 16

// SimilarQuery is the keyword query an item is searched by: the words of
// its title, then its body's most telling words (FeedbackQuery: how often
// it uses a word × how rare the word is, by weigh; nil: how often alone,
// first seen first among equals), stop words left out, rag.MaxQueryTerms
// in all. The title leads because it is what an item is about in the
// fewest words (an issue's summary, a mail's subject); a body's repeated
// rare words are its subject matter, where its first words are often a
// greeting or a template, and its repeated common words say little (on the
// dev Jira corpus's duplicates, similar items' recall@10 / MRR@10 rose from
// 0.595 / 0.354 by count alone to 0.649 / 0.401 with rarity).
func SimilarQuery(title, text string, weigh func(string) float64) string {
	words := rag.QueryWords(title, similarTitleTerms)
	for _, w := range strings.Fields(FeedbackQuery("", text, similarTitleTerms+rag.MaxQueryTerms, weigh)) {
		if len(words) == rag.MaxQueryTerms {
			break
		}
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
}

// Similar finds the items most like req's item: its SimilarQuery, searched
// by BM25 (title field weighted, as Search), fused with its vector
// (similarVector, weight SimilarAlpha), over a pool of passages grouped by
// item. An item's similarity is its best passage's score divided by the
// score of the query item's own best passage — the most any item can match
// the query, as a rule — so 1 is "matches as well as the item itself" and
// the figure means the same whatever the query's length (a raw BM25 score
// grows with the query's words).
func (k *KB) Similar(ctx context.Context, req SimilarRequest) (SimilarResult, error) {
	start := time.Now()
	res := SimilarResult{SourceURN: req.SourceURN, Timings: map[string]float64{}}
	if err := store.ValidateClientID(req.Client); err != nil {
		return res, err
	}
	if req.SourceURN == "" {
		return res, fmt.Errorf("%w: sourceUrn: empty", rag.ErrInvalid)
	}
	q := rag.Query{Limit: req.Limit, Filter: req.Filter}
	if err := q.Normalize(); err != nil {
		return res, err
	}
	limit := q.Limit
	index := k.chunks.For(req.Client)
	weigh, err := k.rarity(ctx, index, req.Text)
	if err != nil {
		return res, err
	}
	res.Query = SimilarQuery(req.Title, req.Text, weigh)
	own, err := index.SourceChunkIDs(ctx, req.SourceURN)
	if err != nil {
		return res, err
	}
	if len(own) == 0 {
		return res, fmt.Errorf("%s: %w", req.SourceURN, ErrNotIndexed)
	}
	if res.Query == "" {
		return res, nil // nothing to search by: a body of symbols alone
	}
	q.Text, q.NoText = res.Query, true
	q.Limit = min(rag.MaxLimit, max(itemPool, 20*(limit+1)))
	if q.Vector, err = k.similarVector(ctx, req); err != nil {
		return res, err
	}
	hits, err := index.BM25(ctx, q)
	if err != nil {
		return res, err
	}
	if len(q.Vector) > 0 {
		// Each side searched by itself, so that each hit keeps its own
		// side's score on every backend (a Weaviate hybrid search
		// answers with the fused score alone).
		vq := q
		vq.Limit = rag.SideCandidates(q.Limit, SimilarAlpha)
		near, err := index.NearVector(ctx, vq)
		if err != nil {
			return res, err
		}
		hits = rag.Fuse(hits, near, SimilarAlpha, rag.RelativeScore, len(hits)+len(near))
		similarities(hits, req.SourceURN, SimilarAlpha)
	}
	var others []rag.Hit
	self := 0.0
	for _, h := range hits {
		if h.Chunk.SourceURN != req.SourceURN {
			if h.Score > 0 && !slices.Contains(notSimilar, h.Chunk.Kind) {
				others = append(others, h)
			}
		} else if len(res.Self) < ItemPassages {
			self, res.Node = max(self, h.Score), h.Chunk.NodeKey
			res.Self = append(res.Self, Passage{ChunkID: h.Chunk.ID, Score: h.Score, Text: h.Chunk.Text})
		}
	}
	if self == 0 && len(hits) > 0 {
		self = hits[0].Score // the item's own passages fell out of the pool: the best there is
	}
	items := rankItems(others, limit)
	if len(res.Self) > 0 {
		items = append([]Item{{Kind: ItemSource, SourceURN: req.SourceURN, Passages: res.Self}}, items...)
	}
	for i := range items {
		it := &items[i]
		it.Score = min(1, it.Score/self)
		for j := range it.Passages {
			it.Passages[j].Score = min(1, it.Passages[j].Score/self)
		}
	}
	res.Timings["retrieve"] = float64(time.Since(start).Microseconds()) / 1000
	if err := k.passageTexts(ctx, req.Client, items)(); err != nil {
		return res, err
	}
	if len(res.Self) > 0 {
		res.Self, items = items[0].Passages, items[1:]
	}
	res.Items = items
	res.Timings["total"] = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

// SimilarAlpha is the vector side's weight in Similar's scores (see
// similarities). Measured on the dev Jira corpus's duplicates (similar
// items' recall@10 / MRR@10, the client's own encoder): BM25 alone 0.757 /
// 0.499; 0.1: 0.777 / 0.515; 0.2: 0.791 / 0.520; 0.3: 0.791 / 0.499. With
// the sides fused by rag.RelativeScore instead: 0.777 / 0.516, 0.784 /
// 0.509, 0.784 / 0.504, and 0.709 / 0.469 at 0.5. The item's vector is of
// its title and text; of its keyword query instead: 0.709 / 0.439.
const SimilarAlpha = 0.2

// similarities scores hybrid hits for Similar, best first: each side's
// own score relative to the query item's best on that side (its BM25
// score; its cosine, below 0 counted as 0), each at most 1, mixed by
// alpha. So a similarity reads against the item's own, as BM25's alone
// did, whatever the pool: relative-score fusion scales each side between
// the pool's worst and best, and the worst of a pool of two would be 0
// however alike. A hit one side did not find has 0 from it. Where the
// item's own passages are not in a side's pool, the pool's best stands for
// them.
func similarities(hits []rag.Hit, sourceURN string, alpha float64) {
	var selfBM25, selfVec, bestBM25, bestVec float64
	for _, h := range hits {
		bestBM25, bestVec = max(bestBM25, h.BM25Score), max(bestVec, h.VectorScore)
		if h.Chunk.SourceURN == sourceURN {
			selfBM25, selfVec = max(selfBM25, h.BM25Score), max(selfVec, h.VectorScore)
		}
	}
	selfBM25, selfVec = cmp.Or(selfBM25, bestBM25), cmp.Or(selfVec, bestVec)
	rel := func(s, self float64) float64 {
		if self <= 0 || s <= 0 {
			return 0
		}
		return min(1, s/self)
	}
	for i := range hits {
		h := &hits[i]
		h.Score = (1-alpha)*rel(h.BM25Score, selfBM25) + alpha*rel(h.VectorScore, selfVec)
	}
	slices.SortStableFunc(hits, func(a, b rag.Hit) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), strings.Compare(a.Chunk.ID, b.Chunk.ID))
	})
}

// similarVector is the vector req's item is searched by: its title and
// text embedded by the client's embedder, the client's common directions
// removed, as Search's query.
func (k *KB) similarVector(ctx context.Context, req SimilarRequest) ([]float32, error) {
	e, err := k.embedderFor(ctx, req.Client)
	if err != nil {
		return nil, err
	}
	vs, err := e.Embed(ctx, []string{req.Title + "\n" + req.Text})
	if err != nil {
		return nil, fmt.Errorf("embed the item: %w", err)
	}
	if len(vs) == 0 || len(vs[0]) == 0 {
		return nil, nil
	}
	v, err := k.queryVector(ctx, req.Client, e, vs[0])
	if err != nil {
		return nil, fmt.Errorf("the client's common directions: %w", err)
	}
	return v, nil
}

// Chunk kinds the pipeline writes (rag.Chunk.Kind, IngestRequest.Kind).
const (
	KindBody   = "body"   // a source item's own text
	KindLink   = "link"   // the text around a link in an item: evidence of the link, an excerpt of the item
	KindPage   = "page"   // a fetched web page
	KindResult = "result" // an executor's result, reporting on the graph
)

// notSimilar are the chunks no item is similar to: excerpts of items (a
// link's context) and reports on them.
var notSimilar = []string{KindLink, KindResult}

// EdgePossibleDuplicate joins two items whose texts are alike enough that
// one may duplicate the other (origin similarity, confidence their
// similarity, evidence the passages that matched on each side). It is
// undirected: From is the lesser node key.
const EdgePossibleDuplicate = "possible_duplicate"

// DuplicateCandidates is how many of its most similar items an item may
// be joined to by possible_duplicate edges.
const DuplicateCandidates = 3

// PossibleDuplicates records a possible_duplicate edge from the item of
// res to each similar item at least minSimilarity
// alike (DuplicateEdges) and returns the edges' keys. Re-recording an edge
// changes nothing (UpsertEdges), so a redone task writes nothing twice.
func (k *KB) PossibleDuplicates(ctx context.Context, client string, res SimilarResult, minSimilarity float64) ([]string, error) {
	edges, err := k.DuplicateEdges(ctx, client, res, minSimilarity)
	if err != nil || len(edges) == 0 {
		return nil, err
	}
	if err := k.graph.For(client).UpsertEdges(ctx, edges...); err != nil {
		return nil, fmt.Errorf("possible duplicates: %w", err)
	}
	keys := make([]string, len(edges))
	for i, e := range edges {
		keys[i] = e.Key()
	}
	return keys, nil
}

// DuplicateEdges returns the possible_duplicate edges PossibleDuplicates
// would record: one to each similar item of res at least minSimilarity
// alike, unless the two nodes are already joined by an edge of any type (a
// person linked them, or a source's fields did: what they are to each
// other is known).
func (k *KB) DuplicateEdges(ctx context.Context, client string, res SimilarResult, minSimilarity float64) ([]graph.Edge, error) {
	main := res.Node
	if len(res.Self) == 0 || main == "" || minSimilarity <= 0 {
		return nil, nil
	}
	var want []Item
	for _, it := range res.Items {
		if it.Score >= minSimilarity && len(it.NodeKeys) > 0 && it.NodeKeys[0] != main {
			want = append(want, it)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	hood, err := k.graph.For(client).Neighbors(ctx, graph.NeighborQuery{Start: []string{main}, Depth: 1, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("possible duplicates: %w", err)
	}
	joined := make(map[string]bool, len(hood.Edges))
	for _, e := range hood.Edges {
		if e.Type != EdgePossibleDuplicate { // one found before is found again
			joined[e.From], joined[e.To] = true, true
		}
	}
	var edges []graph.Edge
	for _, it := range want {
		if other := it.NodeKeys[0]; !joined[other] {
			edges = append(edges, graph.Edge{Type: EdgePossibleDuplicate, From: min(main, other), To: max(main, other), Confidence: it.Score,
				Origin: graph.OriginSimilarity, EvidenceChunkIDs: []string{res.Self[0].ChunkID, it.Passages[0].ChunkID}})
		}
	}
	return edges, nil
}
