package kb_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/rag"
)

type corpusDoc struct {
	Node    string `json:"node"`
	Type    string `json:"type"`
	Content string `json:"content"`
}

type corpusQuery struct {
	Query  string `json:"query"`
	Expect string `json:"expect"`
}

func readJSON[T any](t testing.TB, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func loadCorpus(t testing.TB, e env, client string) {
	t.Helper()
	for _, d := range readJSON[[]corpusDoc](t, "testdata/search/corpus.json") {
		if _, err := e.kb.Ingest(t.Context(), kb.IngestRequest{Client: client, MainNode: d.Node, Content: d.Content, SourceType: d.Type, Kind: "body"}); err != nil {
			t.Fatal(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestSearchQuality: on the fixed corpus, each query's document is among
// the first five passages. BM25-only, vector-only and hybrid are reported;
// hybrid must find every one and do at least as well as either alone.
func TestSearchQuality(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	loadCorpus(t, e, "acme")
	queries := readJSON[[]corpusQuery](t, "testdata/search/queries.json")
	if len(queries) < 20 {
		t.Fatalf("%d queries, want at least 20", len(queries))
	}
	type result struct {
		top5 int
		mrr  float64
		miss []string
	}
	modes := []struct {
		name   string
		alpha  float64
		fusion rag.Fusion
	}{{"bm25", 0, ""}, {"vector", 1, ""}, {"hybrid-relativeScore", kb.DefaultAlpha, rag.RelativeScore}, {"hybrid", kb.DefaultAlpha, ""}}
	results := map[string]*result{}
	for _, m := range modes {
		r := &result{}
		results[m.name] = r
		for _, q := range queries {
			pack, err := e.kb.Search(t.Context(), kb.SearchRequest{Client: "acme", Query: q.Query, Alpha: ptr(m.alpha), Fusion: m.fusion, Limit: 5, Expand: ptr(0)})
			if err != nil {
				t.Fatal(err)
			}
			rank := 0
			for i, it := range pack.Items {
				if (it.Kind == kb.ItemSource || it.Kind == kb.ItemPassage) && slices.Contains(it.NodeKeys, q.Expect) {
					rank = i + 1
					break
				}
			}
			if rank > 0 {
				r.top5++
				r.mrr += 1 / float64(rank)
			} else {
				r.miss = append(r.miss, q.Query)
			}
		}
		r.mrr /= float64(len(queries))
		t.Logf("%-20s top-5 %2d/%d  MRR %.3f  missed %q", m.name, r.top5, len(queries), r.mrr, r.miss)
	}
	h := results["hybrid"]
	if h.top5 != len(queries) {
		t.Errorf("hybrid missed %v", h.miss)
	}
	for _, other := range []string{"bm25", "vector"} {
		if h.top5 < results[other].top5 || h.mrr < results[other].mrr {
			t.Errorf("hybrid (%d, %.3f) worse than %s (%d, %.3f)", h.top5, h.mrr, other, results[other].top5, results[other].mrr)
		}
	}
}

func TestSearchEvidencePack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:TASK-123", Content: task123, SourceType: "JIRA"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "git:abc123", SourceType: "GIT",
		Content: "Invalidate the session cache after a password reset.\n\nrelationships: [\"commit:abc123|FIXES|jira:TASK-123\", \"commit:abc123|AUTHORED_BY|user:mia\"]"}); err != nil {
		t.Fatal(err)
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "login fails after password reset", Group: kb.GroupPassage})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var fixes *kb.Item
	for i, it := range pack.Items {
		kinds[it.Kind]++
		if it.EdgeKey == "fixes::commit:abc123->jira:task-123" {
			fixes = &pack.Items[i]
		}
	}
	if kinds[kb.ItemPassage] == 0 || kinds[kb.ItemEntity] < 4 || kinds[kb.ItemRelation] < 3 {
		t.Fatalf("pack kinds %v: %+v", kinds, pack.Items)
	}
	if pack.Items[0].Kind != kb.ItemPassage || !strings.Contains(pack.Items[0].Content, "Login fails") {
		t.Fatalf("first item %+v", pack.Items[0])
	}
	if fixes == nil || len(fixes.Evidence) != 2 || fixes.Confidence != kb.ConfidenceSyntax {
		t.Fatalf("fixes relation %+v", fixes)
	}
	for _, ev := range fixes.Evidence {
		if !strings.Contains(ev.Text, "FIXES") {
			t.Fatalf("evidence %q does not support the edge", ev.Text)
		}
	}
	// user:mia is two hops from the hits (task → commit → mia).
	var mia *kb.Item
	for i, it := range pack.Items {
		if it.Kind == kb.ItemEntity && it.NodeKeys[0] == "user:mia" {
			mia = &pack.Items[i]
		}
	}
	if mia == nil {
		t.Fatalf("depth-2 entity missing from %+v", pack.Items)
	}
	if want := fmt.Sprintf("%d passages, %d related entities, %d relations", kinds[kb.ItemPassage], kinds[kb.ItemEntity], kinds[kb.ItemRelation]); pack.Summary != want {
		t.Fatalf("summary %q for %v", pack.Summary, kinds)
	}
	for _, phase := range []string{"embed", "retrieve", "expand", "evidence", "total"} {
		if _, ok := pack.Timings[phase]; !ok {
			t.Fatalf("no timing for %s: %v", phase, pack.Timings)
		}
	}
	// Depth 0: no traversal beyond the hits' own nodes.
	shallow, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "login fails after password reset", Expand: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range shallow.Items {
		if it.Kind == kb.ItemEntity && it.Depth > 0 {
			t.Fatalf("depth 0 returned %+v", it)
		}
	}
	// Another client finds nothing.
	other, err := e.kb.Search(ctx, kb.SearchRequest{Client: "globex", Query: "login fails after password reset"})
	if err != nil || len(other.Items) != 0 {
		t.Fatalf("globex: %+v %v", other.Items, err)
	}
}

func TestSearchFiltersAndValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	loadCorpus(t, e, "acme")
	ctx := t.Context()
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "refund rounding yen", Filter: rag.Filter{SourceTypes: []string{"GIT"}}, Expand: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range pack.Items {
		if (it.Kind == kb.ItemSource || it.Kind == kb.ItemPassage) && !strings.HasPrefix(it.NodeKeys[0], "git:") {
			t.Fatalf("filter let through %+v", it)
		}
	}
	future := time.Now().Add(time.Hour)
	if pack, _ := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "refund", Filter: rag.Filter{Since: future}}); len(pack.Items) != 0 {
		t.Fatalf("time filter: %d items", len(pack.Items))
	}
	for name, req := range map[string]kb.SearchRequest{
		"empty query": {Client: "acme", Query: "  "},
		"deep":        {Client: "acme", Query: "x", Expand: ptr(9)},
		"alpha":       {Client: "acme", Query: "x", Alpha: ptr(2.0)},
		"fusion":      {Client: "acme", Query: "x", Fusion: "best"},
	} {
		if _, err := e.kb.Search(ctx, req); !errors.Is(err, rag.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// By default search ranks source items, each with its best passages (at
// most kb.ItemPassages) and the graph refs of those; limit counts items.
// group=passage ranks passages.
func TestSearchRanksItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	pad := strings.Repeat(" The rest of the paragraph is about other things entirely.", kb.ChunkTokens/10)
	var long []string
	for i := range 5 {
		long = append(long, fmt.Sprintf("Paragraph %d: the pump gasket leaks again.", i)+pad)
	}
	for _, r := range []kb.IngestRequest{
		{Client: "acme", MainNode: "jira:PUMP-1", Title: "Pump gasket leaks", Content: strings.Join(long, "\n\n"), SourceURN: "JIRA:PUMP-1"},
		{Client: "acme", MainNode: "jira:PUMP-2", Title: "Seal kit order", Content: "Order a new gasket for the spare pump.", SourceURN: "JIRA:PUMP-2"},
		{Client: "acme", MainNode: "jira:CAFE-3", Title: "Coffee", Content: "The espresso machine needs descaling.", SourceURN: "JIRA:CAFE-3"},
	} {
		if _, err := e.kb.Ingest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "pump gasket", Alpha: ptr(0.0), Expand: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	var urns []string
	var pump1 kb.Item
	for _, it := range pack.Items {
		if it.Kind != kb.ItemSource {
			continue // the graph around them
		}
		urns = append(urns, it.SourceURN)
		if it.SourceURN == "JIRA:PUMP-1" {
			pump1 = it
		}
		if len(it.Passages) == 0 || len(it.Passages) > kb.ItemPassages || it.Passages[0].ChunkID != it.ChunkID || it.Content != it.Passages[0].Text ||
			!slices.Contains(it.NodeKeys, strings.ToLower(strings.Replace(it.SourceURN, "JIRA:", "jira:", 1))) {
			t.Fatalf("item %+v", it)
		}
	}
	slices.Sort(urns)
	if !slices.Equal(urns, []string{"JIRA:PUMP-1", "JIRA:PUMP-2"}) || len(pump1.Passages) != kb.ItemPassages ||
		pump1.Title != "Pump gasket leaks" || !strings.HasPrefix(pack.Summary, "2 items, ") {
		t.Fatalf("items %v: %s %+v", urns, pack.Summary, pump1)
	}
	one, _ := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "pump gasket", Alpha: ptr(0.0), Expand: ptr(0), Limit: 1})
	passages, _ := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "pump gasket", Alpha: ptr(0.0), Expand: ptr(0), Group: kb.GroupPassage})
	count := func(p kb.EvidencePack, kind string) int {
		n := 0
		for _, it := range p.Items {
			if it.Kind == kind {
				n++
			}
		}
		return n
	}
	if count(one, kb.ItemSource) != 1 || count(passages, kb.ItemPassage) != 6 || count(passages, kb.ItemSource) != 0 {
		t.Fatalf("limit 1: %d items; passages: %d", count(one, kb.ItemSource), count(passages, kb.ItemPassage))
	}
	if _, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "pump", Group: "document"}); !errors.Is(err, rag.ErrInvalid) {
		t.Fatalf("bad group: %v", err)
	}
}

// An item's passages are read while the graph is expanded: they are
// filled in whether or not its chunks name a node to expand from (a chunk
// written to the chunk store without refs seeds nothing).
func TestSearchItemsHaveTheirTextsWithoutSeeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	vec := make([]float32, 8)
	vec[0] = 1
	for _, c := range []rag.Chunk{
		{ID: "c1", Text: "The boiler pressure valve sticks in cold weather.", Title: "Boiler valve", SourceURN: "NOTE:1", Vector: vec},
		{ID: "c2", Text: "Replace the boiler pressure valve before winter.", Title: "Boiler valve", SourceURN: "NOTE:1", Vector: vec},
	} {
		if err := e.chunks.For("acme").Upsert(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, expand := range []int{0, 2} {
		pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "boiler pressure valve", Alpha: ptr(0.0), Expand: ptr(expand)})
		if err != nil {
			t.Fatal(err)
		}
		if len(pack.Items) != 1 {
			t.Fatalf("expand %d: %d items: %+v", expand, len(pack.Items), pack.Items)
		}
		it := pack.Items[0]
		if it.Title != "Boiler valve" || len(it.Passages) != 2 || it.Content != it.Passages[0].Text || !strings.Contains(it.Content, "boiler pressure valve") ||
			it.Passages[1].Text == "" || len(it.NodeKeys) != 0 {
			t.Fatalf("expand %d: item %+v", expand, it)
		}
	}
}

// A link's context (kind link) is an excerpt of the item the link is in:
// items leave it out, passages keep it, and a filter for it finds it.
func TestSearchItemsLeaveOutLinkContexts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const text = "The checkout service drops the session cache after a password reset."
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:ops-1", Title: "Checkout loses the session", Content: text,
		SourceURN: "JIRA:OPS-1", SourceType: "JIRA", Kind: kb.KindBody}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "link:https://ci.acme.test/7", Content: "Link https://ci.acme.test/7 found in OPS-1:\n\n" + text,
		Relations: []kb.MetaRelation{{From: "link:https://ci.acme.test/7", Type: "found_in", To: "jira:ops-1"}}, SourceURN: "link:t1", SourceType: "JIRA", Kind: kb.KindLink}); err != nil {
		t.Fatal(err)
	}
	urns := func(group string, kinds ...string) []string {
		t.Helper()
		pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "session cache password reset", Group: group, Filter: rag.Filter{Kinds: kinds}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range pack.Items {
			if it.Kind == kb.ItemSource || it.Kind == kb.ItemPassage {
				out = append(out, it.SourceURN)
			}
		}
		return out
	}
	if got := urns(kb.GroupItem); !slices.Equal(got, []string{"JIRA:OPS-1"}) {
		t.Errorf("items %v", got)
	}
	if got := urns(kb.GroupPassage); len(got) != 2 {
		t.Errorf("passages %v", got)
	}
	if got := urns(kb.GroupItem, kb.KindLink); !slices.Equal(got, []string{"link:t1"}) {
		t.Errorf("items of kind link %v", got)
	}
}

// Below the embedded index's lists' floor every vector search is exact:
// its recall against the exact scan is 1, over the corpus's own queries.
func TestVectorRecallOfASmallIndexIsOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	loadCorpus(t, e, "acme")
	var texts []string
	for _, q := range readJSON[[]corpusQuery](t, "testdata/search/queries.json") {
		texts = append(texts, q.Query)
	}
	recall, ok, err := e.kb.VectorRecall(t.Context(), "acme", texts, kb.VectorCandidates())
	if err != nil || !ok || recall != 1 {
		t.Fatalf("recall %v (measured %v), %v", recall, ok, err)
	}
	if n := kb.VectorCandidates(); n != 80 {
		t.Fatalf("the vector side of a default search retrieves %d chunks, the README says 80", n)
	}
}
