package kb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
)

// Search defaults. Fusion and alpha were measured on testdata/search (27
// queries, GloVe embeddings: BM25 alone finds 24 in the top 5, vectors
// alone 25, ranked fusion all 27 at alpha 0.1 to 0.4; relativeScore scales
// the lowest of a short BM25 list to 0, so a lone keyword match can lose
// to vector noise, and finds 26) and on the duplicates of the dev Jira
// corpus (148 real pairs, kb/eval), where GloVe alone finds a quarter of
// what BM25 finds: at alpha 0.4 fusion lost 10 points of recall to BM25
// alone, at 0.1 it gains on both recall and MRR (0.05 and 0.15 do worse).
// With a stronger embedder (Ollama) raise alpha.
const (
	DefaultFusion   = rag.Ranked
	DefaultAlpha    = 0.1
	DefaultExpand   = 2
	MaxExpand       = 3
	DefaultMaxNodes = 30
	maxEvidence     = 3 // evidence passages shown per relation
	// ItemPassages is how many of an item's best passages it shows.
	ItemPassages = 3
	// itemPool is the fewest passages retrieved to rank items by (twenty
	// per item asked for, when more): an item's passages compete with every
	// other item's, and the pool must hold the items' best ones (on the dev
	// Jira corpus, 100 lost 1.4 points of recall to 200; 400 gained none).
	itemPool = 200
)

// Result groupings.
const (
	GroupItem    = "item"    // rank source items, each with its best passages (default)
	GroupPassage = "passage" // rank passages
)

// SearchRequest is one query. Nil pointers take the defaults.
type SearchRequest struct {
	Client   string
	Query    string
	Alpha    *float64   // 0 = BM25 only … 1 = vector only (default DefaultAlpha)
	Fusion   rag.Fusion // ranked (default here, see DefaultFusion) or relativeScore
	Limit    int        // passages (default 10)
	Expand   *int       // graph depth 0..MaxExpand (default DefaultExpand)
	MaxNodes int        // entities in the pack at most (default DefaultMaxNodes)
	Filter   rag.Filter
	// Group is what Limit counts and the pack ranks: GroupItem (default)
	// or GroupPassage.
	Group string
	// NoFeedback ranks items by the query alone, without the feedback of
	// the best item's words (see feedback.go).
	NoFeedback bool
	// NoTitles leaves the items in the order the query (and feedback) rank
	// them, without title agreement (see titles.go).
	NoTitles bool
}

// Item kinds in an evidence pack.
const (
	ItemSource   = "item" // a source item (a document) with its best passages
	ItemPassage  = "passage"
	ItemEntity   = "entity"
	ItemRelation = "relation"
)

// Evidence is a passage that supports a relation.
type Evidence struct {
	ChunkID string `json:"chunkId"`
	Text    string `json:"text"`
}

// Item is one entry of an evidence pack.
type Item struct {
	Kind     string   `json:"kind"`
	Score    float64  `json:"score"`
	Content  string   `json:"content"`
	NodeKeys []string `json:"nodeKeys"`
	// passages and items (an item's best passage)
	ChunkID   string `json:"chunkId,omitempty"`
	SourceURN string `json:"sourceUrn,omitempty"`
	// Date is when the item (or passage's source) was observed.
	Date *time.Time `json:"date,omitempty"`
	// items
	Title    string    `json:"title,omitempty"`
	Passages []Passage `json:"passages,omitempty"`
	// entities
	Type  string         `json:"type,omitempty"`
	Depth int            `json:"depth,omitempty"`
	Props map[string]any `json:"props,omitempty"`
	// relations
	EdgeKey    string       `json:"edgeKey,omitempty"`
	EdgeType   string       `json:"edgeType,omitempty"`
	Confidence float64      `json:"confidence,omitempty"`
	Origin     graph.Origin `json:"origin,omitempty"`
	Evidence   []Evidence   `json:"evidence,omitempty"`
}

// Passage is one of an item's best passages.
type Passage struct {
	ChunkID string  `json:"chunkId"`
	Score   float64 `json:"score"`
	Text    string  `json:"text"`
}

// EvidencePack is what a search returns: passages from the chunk store and
// entities and relations from the graph around them.
type EvidencePack struct {
	Query string `json:"query"`
	// Feedback is the words of the best item the items were also ranked
	// by (see feedback.go; empty: none).
	Feedback string             `json:"feedback,omitempty"`
	Items    []Item             `json:"items"`
	Summary  string             `json:"summary"`
	Timings  map[string]float64 `json:"timingsMs"`
}

// Search runs a hybrid search, seeds the graph with the nodes the hits refer
// to, expands them to the requested depth, and packs passages, entities and
// relations (each relation with the text of its evidence).
//
// Entity scores: a seed scores as its best passage; a node reached at depth
// d scores the best seed score divided by (1 + d). Relations score their
// confidence.
func (k *KB) Search(ctx context.Context, req SearchRequest) (EvidencePack, error) {
	start := time.Now()
	pack := EvidencePack{Query: req.Query, Timings: map[string]float64{}}
	lap := func(name string, since time.Time) time.Time {
		now := time.Now()
		pack.Timings[name] = float64(now.Sub(since).Microseconds()) / 1000
		return now
	}
	if err := store.ValidateClientID(req.Client); err != nil {
		return pack, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return pack, fmt.Errorf("%w: query: empty", rag.ErrInvalid)
	}
	alpha := DefaultAlpha
	if req.Alpha != nil {
		alpha = *req.Alpha
	}
	depth := DefaultExpand
	if req.Expand != nil {
		depth = *req.Expand
	}
	if depth < 0 || depth > MaxExpand {
		return pack, fmt.Errorf("%w: expand: %d is not 0..%d", rag.ErrInvalid, depth, MaxExpand)
	}
	maxNodes := cmp.Or(req.MaxNodes, DefaultMaxNodes)
	group := cmp.Or(req.Group, GroupItem)
	if group != GroupItem && group != GroupPassage {
		return pack, fmt.Errorf("%w: group: %q is not %s or %s", rag.ErrInvalid, req.Group, GroupItem, GroupPassage)
	}

	q := rag.Query{Text: req.Query, Alpha: alpha, Fusion: cmp.Or(req.Fusion, DefaultFusion), Limit: req.Limit, Filter: req.Filter}
	if err := q.Normalize(); err != nil {
		return pack, err
	}
	limit := q.Limit
	if group == GroupItem {
		q.Limit = min(rag.MaxLimit, max(itemPool, 20*limit))
		q.NoText = true // read below for the passages kept
	}
	t := time.Now()
	if alpha > 0 {
		e, err := k.embedderFor(ctx, req.Client)
		if err != nil {
			return pack, err
		}
		vs, err := e.Embed(ctx, []string{req.Query})
		if err != nil {
			return pack, fmt.Errorf("embed query: %w", err)
		}
		if q.Vector, err = k.queryVector(ctx, req.Client, e, vs[0]); err != nil {
			return pack, fmt.Errorf("the client's common directions: %w", err)
		}
	}
	t = lap("embed", t)
	hits, err := k.chunks.For(req.Client).Hybrid(ctx, q)
	if err != nil {
		return pack, err
	}
	t = lap("retrieve", t)

	// The passages' texts are read while the graph is expanded (the
	// items are not touched until fillTexts).
	fillTexts := func() error { return nil }
	if group == GroupItem {
		if !slices.Contains(req.Filter.Kinds, KindLink) {
			hits = slices.DeleteFunc(hits, isLinkContext)
		}
		items := rankItems(hits, len(hits))
		if !req.NoFeedback {
			if items, pack.Feedback, err = k.feedback(ctx, req.Client, q, items); err != nil {
				return pack, err
			}
			t = lap("feedback", t)
		}
		if !req.NoTitles && alpha < 1 { // lexical: not for vectors alone
			items = titleAgreement(req.Query, items, k.weigh)
			t = lap("titles", t)
		}
		pack.Items = items[:min(limit, len(items))]
		fillTexts = k.passageTexts(ctx, req.Client, pack.Items)
	} else {
		for _, h := range hits {
			pack.Items = append(pack.Items, Item{Kind: ItemPassage, Score: h.Score, Content: h.Chunk.Text, NodeKeys: h.Chunk.GraphRefs,
				ChunkID: h.Chunk.ID, SourceURN: h.Chunk.SourceURN, Date: dateOf(h.Chunk)})
		}
	}
	// Chunks keep the refs they were written with: one that has become an
	// alias since (identity resolution) names its person now.
	for i := range pack.Items {
		pack.Items[i].NodeKeys = k.resolver.canonical(ctx, req.Client, pack.Items[i].NodeKeys)
	}
	seedScore := map[string]float64{}
	var seeds []string
	for _, it := range pack.Items {
		for _, ref := range it.NodeKeys {
			if _, ok := seedScore[ref]; !ok {
				seeds = append(seeds, ref)
			}
			seedScore[ref] = max(seedScore[ref], it.Score)
		}
	}
	passages := len(pack.Items)
	var hood graph.Neighborhood
	var expandErr error
	if len(seeds) > 0 {
		hood, expandErr = k.graph.For(req.Client).Neighbors(ctx, graph.NeighborQuery{Start: seeds, Depth: depth, Limit: maxNodes})
	}
	if err := fillTexts(); err != nil {
		return pack, err
	}
	if expandErr != nil {
		return pack, fmt.Errorf("expand: %w", expandErr)
	}
	var entities, relations int
	if len(seeds) > 0 {
		t = lap("expand", t)
		best := 0.0
		for _, s := range seedScore {
			best = max(best, s)
		}
		for _, v := range hood.Nodes {
			score := best / float64(1+v.Depth)
			if s, ok := seedScore[v.Key]; ok {
				score = s
			}
			pack.Items = append(pack.Items, Item{Kind: ItemEntity, Score: score, Content: describeNode(v.Node), NodeKeys: []string{v.Key},
				Type: v.Type, Depth: v.Depth, Props: v.Props})
		}
		entities = len(hood.Nodes)
		relItems, err := k.relations(ctx, req.Client, hood.Edges)
		if err != nil {
			return pack, err
		}
		pack.Items = append(pack.Items, relItems...)
		relations = len(relItems)
		lap("evidence", t)
	}
	what := "passages"
	if group == GroupItem {
		what = "items"
	}
	pack.Summary = fmt.Sprintf("%d %s, %d related entities, %d relations", passages, what, entities, relations)
	pack.Timings["total"] = float64(time.Since(start).Microseconds()) / 1000
	return pack, nil
}

// rankItems groups passages (best first) by their source item and returns
// the best limit items, each scored by its best passage (a second one
// added to it helped a little on BM25 scores of the dev Jira corpus, but
// with rank fusion, whose scores lie close together, a weak second passage
// outweighs the gap between the top ranks), with its best ItemPassages
// passages and the graph refs of those.
func rankItems(hits []rag.Hit, limit int) []Item {
	byURN := make(map[string]int, min(limit, len(hits)))
	items := make([]Item, 0, min(limit, len(hits)))
	for _, h := range hits {
		i, ok := byURN[h.Chunk.SourceURN]
		if !ok {
			if len(items) == limit {
				continue // an item after the best limit: no need to build it
			}
			i = len(items)
			byURN[h.Chunk.SourceURN] = i
			items = append(items, Item{Kind: ItemSource, Score: h.Score, Content: h.Chunk.Text, ChunkID: h.Chunk.ID,
				SourceURN: h.Chunk.SourceURN, Title: h.Chunk.Title, Date: dateOf(h.Chunk)})
		}
		it := &items[i]
		if len(it.Passages) < ItemPassages {
			it.Passages = append(it.Passages, Passage{ChunkID: h.Chunk.ID, Score: h.Score, Text: h.Chunk.Text})
			for _, ref := range h.Chunk.GraphRefs {
				if !slices.Contains(it.NodeKeys, ref) {
					it.NodeKeys = append(it.NodeKeys, ref)
				}
			}
		}
	}
	return items // in the order of their best passages
}

// isLinkContext reports a link's context: an excerpt of the item the link
// is in, not an item of its own (the item ranks by its own text; the link
// is reached through the graph, found_in). Items leave them out unless a
// filter asks for them.
func isLinkContext(h rag.Hit) bool { return h.Chunk.Kind == KindLink }

// passageTexts starts reading the texts (and the items' titles) of the
// items' passages that came without them (rag.Query.NoText), in one call,
// and returns a function that waits for them and fills them in. Search
// expands the graph meanwhile; the items must not be moved (appended to)
// before fill is called.
func (k *KB) passageTexts(ctx context.Context, client string, items []Item) (fill func() error) {
	var want []string
	for _, it := range items {
		for _, p := range it.Passages {
			if p.Text == "" {
				want = append(want, p.ChunkID)
			}
		}
	}
	if len(want) == 0 {
		return func() error { return nil }
	}
	var byID map[string]rag.Chunk
	var err error
	read := make(chan struct{})
	go func() {
		defer close(read)
		byID, err = rag.Texts(ctx, k.chunks.For(client), want...)
	}()
	return func() error {
		<-read
		if err != nil {
			return fmt.Errorf("passages: %w", err)
		}
		for i := range items {
			it := &items[i]
			for j := range it.Passages {
				if p := &it.Passages[j]; p.Text == "" {
					c := byID[p.ChunkID]
					p.Text, it.Title = c.Text, cmp.Or(it.Title, c.Title)
				}
			}
			it.Content = it.Passages[0].Text
		}
		return nil
	}
}

// relations turns edges into items with the text of (up to maxEvidence of)
// their evidence chunks, fetched in one call.
func (k *KB) relations(ctx context.Context, client string, edges []graph.Edge) ([]Item, error) {
	if len(edges) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(edges, func(a, b graph.Edge) int { return cmp.Compare(b.Confidence, a.Confidence) })
	var want []string
	for _, e := range edges {
		for _, c := range e.EvidenceChunkIDs[:min(maxEvidence, len(e.EvidenceChunkIDs))] {
			if !slices.Contains(want, c) {
				want = append(want, c)
			}
		}
	}
	chunks, err := rag.Texts(ctx, k.chunks.For(client), want...)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	items := make([]Item, 0, len(edges))
	for _, e := range edges {
		it := Item{Kind: ItemRelation, Score: e.Confidence, Content: e.From + " -[" + e.Type + "]-> " + e.To, NodeKeys: []string{e.From, e.To},
			EdgeKey: e.Key(), EdgeType: e.Type, Confidence: e.Confidence, Origin: e.Origin}
		for _, c := range e.EvidenceChunkIDs[:min(maxEvidence, len(e.EvidenceChunkIDs))] {
			if ch, ok := chunks[c]; ok {
				it.Evidence = append(it.Evidence, Evidence{ChunkID: c, Text: ch.Text})
			}
		}
		items = append(items, it)
	}
	return items, nil
}

func describeNode(n graph.Node) string {
	var b strings.Builder
	b.WriteString(n.Key)
	keys := make([]string, 0, len(n.Props))
	for k := range n.Props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %v", k, n.Props[k])
	}
	if len(keys) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// Related returns the relations of the nodes within depth of key (at most
// limit nodes), each with the text of its evidence, most confident first.
func (k *KB) Related(ctx context.Context, client, key string, depth, limit int) ([]Item, error) {
	hood, err := k.graph.For(client).Neighbors(ctx, graph.NeighborQuery{Start: []string{key}, Depth: depth, Limit: limit})
	if err != nil {
		return nil, err
	}
	return k.relations(ctx, client, hood.Edges)
}

// dateOf is when a chunk's source was observed (nil when unknown).
func dateOf(c rag.Chunk) *time.Time {
	if c.Timestamp.IsZero() {
		return nil
	}
	t := c.Timestamp.UTC()
	return &t
}

// VectorRecall measures the vector side of search against an exact scan:
// for each query (embedded, the client's common directions removed, as
// Search does it), the share of the best limit chunks of a scan of every
// vector that the index's NearVector — which may search a part of them
// (the embedded index's lists, ivf.go, when on) — finds too, over all
// the queries. ok is false where the index has no exact scan.
func (k *KB) VectorRecall(ctx context.Context, client string, queries []string, limit int) (recall float64, ok bool, err error) {
	index := k.chunks.For(client)
	exact, ok := index.(rag.ExactVectorSearcher)
	if !ok || len(queries) == 0 {
		return 0, false, nil
	}
	e, err := k.embedderFor(ctx, client)
	if err != nil {
		return 0, false, err
	}
	vs, err := e.Embed(ctx, queries)
	if err != nil {
		return 0, false, fmt.Errorf("embed queries: %w", err)
	}
	found, total := 0, 0
	for _, v := range vs {
		qv, err := k.queryVector(ctx, client, e, v)
		if err != nil {
			return 0, false, fmt.Errorf("the client's common directions: %w", err)
		}
		q := rag.Query{Vector: qv, Limit: limit}
		want, err := exact.NearVectorExact(ctx, q)
		if err != nil {
			return 0, false, err
		}
		got, err := index.NearVector(ctx, q)
		if err != nil {
			return 0, false, err
		}
		have := make(map[string]bool, len(got))
		for _, h := range got {
			have[h.Chunk.ID] = true
		}
		// A chunk scoring no more than the last found is as good as it
		// (texts repeat: many chunks tie, and which of them make the
		// best limit is arbitrary either way).
		last := math.Inf(-1)
		if len(got) == len(want) && len(got) > 0 {
			last = got[len(got)-1].Score
		}
		for _, h := range want {
			total++
			if have[h.Chunk.ID] || h.Score <= last+1e-6 {
				found++
			}
		}
	}
	if total == 0 {
		return 0, false, nil
	}
	return float64(found) / float64(total), true, nil
}

// VectorCandidates is how many chunks the vector side of a default search
// (items, 10 of them, alpha DefaultAlpha) retrieves.
func VectorCandidates() int { return rag.SideCandidates(max(itemPool, 20*10), DefaultAlpha) }
