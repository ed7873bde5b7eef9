package kb_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/kb/graph"
	graphsqlite "github.com/jervis-dev/jervis/kb/graph/sqlite"
	"github.com/jervis-dev/jervis/kb/rag"
)

var embedder = sync.OnceValue(func() *glove.Embedder {
	e, err := glove.New()
	if err != nil {
		panic(err)
	}
	return e
})

type env struct {
	kb     *kb.KB
	graph  graph.Store
	chunks rag.Store
	store  store.Store
}

func newEnv(t testing.TB) env { return newEnvAt(t, t.TempDir()) }

func newEnvAt(t testing.TB, dir string) env {
	t.Helper()
	all := embeddedtest.Open(t, dir)
	return env{kb: all.KB.KB, graph: all.Graph, chunks: all.Chunks, store: all.Store}
}

// The original design's Jira example (docs: "Metadata block (embedded in
// content)"), as a Jira issue would be ingested.
const task123 = `TASK-123: Login fails after password reset

John reported that users cannot log in after resetting their password. The
session service rejects the new credentials until the cache expires.

relationships: [
  "jira:TASK-123|MENTIONS|user:john",
  "jira:TASK-123|AFFECTS|file:Service.kt",
  "commit:abc123|FIXES|jira:TASK-123"
]
`

func TestIngestDesignJiraExample(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		content string
		nodes   []string
		edges   map[string]string // edge key → a line of the chunk that must be its evidence
	}{
		{"relationships block", task123,
			[]string{"commit:abc123", "file:service.kt", "jira:task-123", "user:john"},
			map[string]string{
				"mentions::jira:task-123->user:john":      `"jira:TASK-123|MENTIONS|user:john"`,
				"affects::jira:task-123->file:service.kt": `"jira:TASK-123|AFFECTS|file:Service.kt"`,
				"fixes::commit:abc123->jira:task-123":     `"commit:abc123|FIXES|jira:TASK-123"`,
			}},
		{"short-hand against the main node", "Short-hand relationships from the design, expanded against the main node:\n\n" +
			"relationships: [\n  \"TASK-123|MENTIONS|user:john\",\n  \"file:Service.kt|RELATED_TO|TASK-123\"\n]\n",
			[]string{"file:service.kt", "jira:task-123", "user:john"},
			map[string]string{
				"mentions::jira:task-123->user:john":         `"TASK-123|MENTIONS|user:john"`,
				"related_to::file:service.kt->jira:task-123": `"file:Service.kt|RELATED_TO|TASK-123"`,
			}},
		{"one relationship per paragraph", "The assignee is set below.\n\njira:TASK-123 -[ASSIGNED_TO]-> user:john and nothing else here\n\n" +
			"Work landed in a commit: commit:abc123->FIXES->jira:TASK-123 closes it.\n",
			[]string{"commit:abc123", "jira:task-123", "user:john"},
			map[string]string{
				"assigned_to::jira:task-123->user:john": "-[ASSIGNED_TO]->",
				"fixes::commit:abc123->jira:task-123":   "->FIXES->",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := t.Context()
			res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:TASK-123", Content: tc.content, SourceType: "JIRA", Kind: "issue"})
			if err != nil {
				t.Fatal(err)
			}
			g := e.graph.For("acme")
			counts, _ := g.CountByType(ctx)
			total := 0
			for _, n := range counts {
				total += n
			}
			got := slices.Sorted(slices.Values(res.Nodes))
			if !slices.Equal(got, tc.nodes) || total != len(tc.nodes) {
				t.Fatalf("nodes %v (%d stored), want %v", got, total, tc.nodes)
			}
			if len(res.Edges) != len(tc.edges) {
				t.Fatalf("edges %v, want %d", res.Edges, len(tc.edges))
			}
			chunks, _ := e.chunks.For("acme").Get(ctx, res.Chunks...)
			text := map[string]string{}
			for _, c := range chunks {
				text[c.ID] = c.Text
			}
			for key, line := range tc.edges {
				edge, err := g.Edge(ctx, key)
				if err != nil {
					t.Fatalf("edge %s: %v (have %v)", key, err, res.Edges)
				}
				if len(edge.EvidenceChunkIDs) != 1 || !strings.Contains(text[edge.EvidenceChunkIDs[0]], line) {
					t.Fatalf("edge %s evidence %v is not the chunk with %q", key, edge.EvidenceChunkIDs, line)
				}
				if edge.Origin != graph.OriginSyntax || edge.Confidence != kb.ConfidenceSyntax {
					t.Fatalf("edge %s origin %s confidence %v", key, edge.Origin, edge.Confidence)
				}
			}
			// Every chunk links back to the main node; the main node links to every chunk.
			main, _ := g.Node(ctx, "jira:task-123")
			if !slices.Equal(main.RAGChunks, slices.Sorted(slices.Values(res.Chunks))) {
				t.Fatalf("main node chunks %v, chunks %v", main.RAGChunks, res.Chunks)
			}
			for _, c := range chunks {
				if !slices.Contains(c.GraphRefs, "jira:task-123") {
					t.Fatalf("chunk %s refs %v", c.ID, c.GraphRefs)
				}
			}
		})
	}
}

func TestAliasesMergeIntoOneNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if err := e.kb.Resolver().Alias(ctx, "acme", "user:john.doe@example.com", "User:John"); err != nil {
		t.Fatal(err)
	}
	for i, who := range []string{"user:John", "User:john", "user:john", "user:john.doe@example.com", "USER::JOHN"} {
		_, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "email:" + string(rune('a'+i)),
			Content: "Message " + who + " wrote about the outage.", Relations: []kb.MetaRelation{{From: "email:" + string(rune('a'+i)), Type: "FROM", To: who}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	counts, _ := e.graph.For("acme").CountByType(ctx)
	if counts["user"] != 1 || counts["email"] != 5 {
		t.Fatalf("counts %v, want one user and five emails", counts)
	}
	john, err := e.graph.For("acme").Node(ctx, "user:john")
	if err != nil || len(john.RAGChunks) != 5 {
		t.Fatalf("user:john %+v %v", john, err)
	}
	// The alias belongs to acme only.
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "globex", MainNode: "email:z", Content: "From user:john.doe@example.com about invoices."}); err != nil {
		t.Fatal(err)
	}
	gc, _ := e.graph.For("globex").CountByType(ctx)
	if _, err := e.graph.For("globex").Node(ctx, "user:john.doe@example.com"); err != nil || gc["user"] != 1 {
		t.Fatalf("globex resolved acme's alias: %v %v", gc, err)
	}
}

// runbookIntro is the runbook's first paragraph in every version.
const runbookIntro = "The runbook for deploys lives here and is long enough."

// runbook is a version of acme's runbook page (confluence:42), each
// paragraph padded to be a chunk of its own (kb.ChunkTokens).
func runbook(paragraphs ...string) kb.IngestRequest {
	pad := strings.Repeat(" More words to read.", kb.ChunkTokens/8)
	return kb.IngestRequest{Client: "acme", MainNode: "confluence:runbook", SourceURN: "confluence:42",
		Content: strings.Join(paragraphs, pad+"\n\n") + pad}
}

func TestReingestAndNewVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	g, idx := e.graph.For("acme"), e.chunks.For("acme")
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	v1 := runbook(runbookIntro, "Escalation: page person:ann first, then person:bob if nobody answers.",
		"Databases: confluence:runbook -[DESCRIBES]-> service:orders-db for the orders team.")
	v1.ObservedAt = at
	r1, err := e.kb.Ingest(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func() (map[string]int, []string, graph.Node) {
		c, _ := g.CountByType(ctx)
		ids, _ := idx.SourceChunkIDs(ctx, "confluence:42")
		n, _ := g.Node(ctx, "person:bob")
		return c, ids, n
	}
	c1, ids1, bob1 := snapshot()
	r2, err := e.kb.Ingest(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	c2, ids2, bob2 := snapshot()
	if !slices.Equal(r1.Chunks, r2.Chunks) || !slices.Equal(ids1, ids2) || len(c1) != len(c2) || !bob1.LastSeen.Equal(bob2.LastSeen) || r2.RemovedChunks != 0 {
		t.Fatalf("re-ingest changed something: %v %v %+v %+v", c1, c2, bob1, bob2)
	}

	// Version 2 drops bob and the database paragraph, and adds carol.
	v2 := runbook(runbookIntro, "Escalation: page person:ann first, then person:carol if nobody answers.")
	v2.ObservedAt = at.Add(time.Hour)
	r3, err := e.kb.Ingest(ctx, v2)
	if err != nil {
		t.Fatal(err)
	}
	if r3.RemovedChunks != 2 {
		t.Fatalf("removed %d chunks, want the 2 changed paragraphs", r3.RemovedChunks)
	}
	for _, gone := range []string{"person:bob", "service:orders-db"} {
		if _, err := g.Node(ctx, gone); !errors.Is(err, graph.ErrNotFound) {
			t.Errorf("%s survived its last evidence: %v", gone, err)
		}
	}
	if _, err := g.Edge(ctx, "describes::confluence:runbook->service:orders-db"); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("edge survived its evidence: %v", err)
	}
	ann, err := g.Node(ctx, "person:ann")
	if err != nil || len(ann.RAGChunks) != 1 || !slices.Contains(r3.Chunks, ann.RAGChunks[0]) {
		t.Fatalf("ann: %+v %v", ann, err)
	}
	if _, err := g.Node(ctx, "person:carol"); err != nil {
		t.Fatal(err)
	}
	ids3, _ := idx.SourceChunkIDs(ctx, "confluence:42")
	if len(ids3) != 2 {
		t.Fatalf("source has %d chunks, want 2", len(ids3))
	}
	if hits, _ := idx.BM25(ctx, rag.Query{Text: "orders database"}); len(hits) != 0 {
		t.Fatalf("removed text still searchable: %v", hits)
	}
}

// A new version's stale chunks leave every node and edge that held them,
// found without an index by chunk ID (graph.Held): a node merged since
// into another (the alias registry names it) and a possible_duplicate edge
// to an item the chunk never named.
func TestStaleChunksLeaveMergedNodesAndSimilarityEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	g := e.graph.For("acme")
	v1 := runbook(runbookIntro, "Escalation: page person:ann first, then person:bob if nobody answers.",
		"Databases: the orders database is restored from last night's backup.")
	r1, err := e.kb.Ingest(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:ops-1", SourceURN: "jira:ops-1",
		Content: "Restore the orders database from last night's backup."})
	if err != nil {
		t.Fatal(err)
	}
	// bob is merged into robert, who now holds the escalation chunk.
	if err := e.kb.Resolver().Alias(ctx, "acme", "person:bob", "person:robert"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.MergeNode(ctx, "person:bob", "person:robert"); err != nil {
		t.Fatal(err)
	}
	robert, err := g.Node(ctx, "person:robert")
	if err != nil || len(robert.RAGChunks) != 1 {
		t.Fatalf("robert after the merge: %+v %v", robert, err)
	}
	// The databases paragraph is like ops-1: an edge with a passage of each.
	dup := graph.Edge{Type: kb.EdgePossibleDuplicate, From: "confluence:runbook", To: "jira:ops-1", Confidence: 0.9, Origin: graph.OriginSimilarity,
		EvidenceChunkIDs: []string{r1.Chunks[2], other.Chunks[0]}}
	if err := g.UpsertEdges(ctx, dup); err != nil {
		t.Fatal(err)
	}

	r2, err := e.kb.Ingest(ctx, runbook(runbookIntro))
	if err != nil {
		t.Fatal(err)
	}
	if r2.RemovedChunks != 2 {
		t.Fatalf("removed %d chunks, want 2", r2.RemovedChunks)
	}
	if n, err := g.Node(ctx, "person:robert"); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("robert kept the stale chunk his alias was given: %+v %v", n, err)
	}
	got, err := g.Edge(ctx, dup.Key())
	if err != nil || !slices.Equal(got.EvidenceChunkIDs, []string{other.Chunks[0]}) {
		t.Errorf("possible_duplicate edge after its runbook passage went: %+v %v", got, err)
	}
	if r2.Removed.EdgesUpdated != 1 {
		t.Errorf("removed %+v, want the possible_duplicate edge updated", r2.Removed)
	}
}

// hookGraph is the embedded graph with hooks into each client graph's
// writes: afterNodes runs after UpsertNodes (g the client graph without
// hooks), beforeMerge before MergeNode.
type hookGraph struct {
	graph.Store
	afterNodes  func(ctx context.Context, g graph.Graph, client string, nodes []graph.Node) error
	beforeMerge func(ctx context.Context, client string) error
}

func (h *hookGraph) For(client string) graph.Graph {
	return &hookClient{Graph: h.Store.For(client), h: h, client: client}
}

type hookClient struct {
	graph.Graph
	h      *hookGraph
	client string
}

func (c *hookClient) UpsertNodes(ctx context.Context, nodes ...graph.Node) error {
	if err := c.Graph.UpsertNodes(ctx, nodes...); err != nil || c.h.afterNodes == nil {
		return err
	}
	return c.h.afterNodes(ctx, c.Graph, c.client, nodes)
}

func (c *hookClient) MergeNode(ctx context.Context, alias, canonical string) (graph.Merged, error) {
	if c.h.beforeMerge != nil {
		if err := c.h.beforeMerge(ctx, c.client); err != nil {
			return graph.Merged{}, err
		}
	}
	return c.Graph.MergeNode(ctx, alias, canonical)
}

// A person merged into another between a batch's nodes and its edges: the
// edges go to the node the person was merged into, in the same write. They
// failed on the missing end, and the batch was written again a request at a
// time, each bringing the merged node back.
func TestEdgesFollowAMergeBetweenNodesAndEdges(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	gs, err := graphsqlite.Open(ctx, filepath.Join(dir, graphsqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// The identity loop merges bob into robert (the registry first, then
	// MergeNode, as KB.ApplyIdentities does) right after bob's node is
	// first written: between the batch's nodes and its edges.
	var k *kb.KB
	var once sync.Once
	mg := &hookGraph{Store: gs, afterNodes: func(ctx context.Context, g graph.Graph, client string, nodes []graph.Node) error {
		var err error
		if slices.ContainsFunc(nodes, func(n graph.Node) bool { return n.Key == "person:bob" }) {
			once.Do(func() {
				if err = k.Resolver().Alias(ctx, client, "person:bob", "person:robert"); err == nil {
					_, err = g.MergeNode(ctx, "person:bob", "person:robert")
				}
			})
		}
		return err
	}}
	all := embeddedtest.OpenWith(t, dir, embedded.Backends{Graph: mg})
	k = all.KB.KB
	reqs := []kb.IngestRequest{
		{Client: "acme", MainNode: "jira:ops-7", SourceURN: "jira:ops-7", Content: "Disk alarms on the orders database.\n\n" +
			"relationships: [\n  \"jira:OPS-7|ASSIGNED_TO|person:bob\",\n  \"person:bob|MENTIONS|person:robert\"\n]\n"},
		{Client: "acme", MainNode: "jira:ops-8", SourceURN: "jira:ops-8", Content: "Rotate the backup keys.\n\n" +
			"relationships: [\n  \"jira:OPS-8|ASSIGNED_TO|person:ann\"\n]\n"},
	}
	res, errs := all.KB.KB.IngestBatch(ctx, reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	g := mg.For("acme")
	if n, err := g.Node(ctx, "person:bob"); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("the merged person is back: %+v %v", n, err)
	}
	for _, key := range []string{"assigned_to::jira:ops-7->person:robert", "assigned_to::jira:ops-8->person:ann"} {
		if e, err := g.Edge(ctx, key); err != nil || len(e.EvidenceChunkIDs) == 0 {
			t.Errorf("edge %s: %+v %v", key, e, err)
		}
	}
	// bob → robert became robert → robert: left out, as MergeNode drops it.
	for _, key := range []string{"mentions::person:robert->person:robert", "mentions::person:bob->person:robert"} {
		if e, err := g.Edge(ctx, key); !errors.Is(err, graph.ErrNotFound) {
			t.Errorf("edge %s: %+v %v", key, e, err)
		}
	}
	if !slices.Contains(res[0].Edges, "assigned_to::jira:ops-7->person:bob") {
		t.Errorf("the result names %v, not the edge as written", res[0].Edges)
	}
}

func TestIngestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	huge := strings.Repeat("All work and no play makes a dull document. ", 50<<20/44+1)
	for _, tc := range []struct {
		name string
		req  kb.IngestRequest
		want error
	}{
		{"empty", kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: ""}, kb.ErrEmptyContent},
		{"whitespace", kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: " \n\t \n"}, kb.ErrEmptyContent},
		{"binary", kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"}, kb.ErrBinary},
		{"control characters", kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: strings.Repeat("a\x01\x02\x03", 100)}, kb.ErrBinary},
		{"50 MB", kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: huge}, kb.ErrTooLarge},
		{"punctuation main ref", kb.IngestRequest{Client: "acme", MainNode: "!!!:???", Content: "text"}, kb.ErrBadRef},
		{"no namespace", kb.IngestRequest{Client: "acme", MainNode: "TASK-1", Content: "text"}, kb.ErrBadRef},
		{"long ref", kb.IngestRequest{Client: "acme", MainNode: "doc:" + strings.Repeat("x", 600), Content: "text"}, kb.ErrBadRef},
		{"bad client", kb.IngestRequest{Client: "../etc", MainNode: "doc:1", Content: "text"}, store.ErrInvalid},
	} {
		_, err := e.kb.Ingest(ctx, tc.req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Malformed relationship lines and punctuation-only refs in the text are
	// skipped; the document is still indexed, and no node has an empty key.
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "doc:2",
		Content: "Broken lines follow.\n\n!!!:???|X|doc:2\n|EDGE|\nuser:|X|\n->->\n-[ ]->\nab: cd\nok:1|LINKS|doc:2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Edges, []string{"links::ok:1->doc:2"}) {
		t.Fatalf("edges %v", res.Edges)
	}
	for _, n := range res.Nodes {
		if r, err := kb.ParseRef(n); err != nil || r.Value == "" {
			t.Fatalf("bad node key %q", n)
		}
	}
	// A document just under the limit in size but ≥ 40,000 characters is windowed.
	big := strings.Repeat("Windowed text about releases and deploys. ", 2000)
	res, err = e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "doc:big", Content: big})
	if err != nil || len(res.Chunks) < 20 {
		t.Fatalf("big document: %d chunks, %v", len(res.Chunks), err)
	}
}

// One relation that cannot be stored — a ref with nothing left after
// normalisation, an edge type with no letter — is left out with a warning;
// the rest of the document is ingested. A relationship name of any spelling
// becomes a valid edge type.
func TestIngestLeavesOutBadRelations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "doc:1", Content: "text about a and b",
		Relations: []kb.MetaRelation{
			{From: "doc:1", Type: "x", To: "..."},
			{From: "doc:1", Type: "???", To: "a:b"},
			{From: "doc:1", Type: "has spaces", To: "a:b"},
			{From: "doc:1", Type: "Gantt: start-finish", To: "a:c"},
			{From: "doc:1", Type: "x", To: "doc:" + strings.Repeat("x", 600)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Edges, []string{"has_spaces::doc:1->a:b", "gantt_start_finish::doc:1->a:c"}) {
		t.Fatalf("edges %v", res.Edges)
	}
	if len(res.Warnings) != 3 || !strings.Contains(res.Warnings[0], "bad ref") || !strings.Contains(res.Warnings[1], "no letter or digit") ||
		!strings.Contains(res.Warnings[2], "more than 512") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	if _, err := e.graph.For("acme").Edge(ctx, "gantt_start_finish::doc:1->a:c"); err != nil {
		t.Fatal(err)
	}
}

// Pasted terminal output carries control characters (backspaces, escapes):
// they are removed with a warning, and the text is indexed; content that is
// mostly control characters is still refused as binary.
func TestIngestRemovesStrayControlCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	text := "Build log follows.\n\n" + strings.Repeat("downloading 10% ... \b\b\b", 30) + "\x1b[0mdone\n"
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "doc:log", Content: text})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "91 control characters removed") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	cs, err := e.chunks.For("acme").Get(ctx, res.Chunks...)
	if err != nil || len(cs) == 0 {
		t.Fatal(cs, err)
	}
	all := ""
	for _, c := range cs {
		all += c.Text
	}
	if strings.ContainsAny(all, "\b\x1b") || !strings.Contains(all, "[0mdone") {
		t.Fatalf("chunks %q", all)
	}
}

// Mentions in prose become nodes only in the namespaces the caller allows;
// relationship syntax is not limited; a mention's id runs to the next space
// or bracket (message ids carry $ and =), without trailing punctuation.
func TestIngestMentionNamespaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "email:1", MentionNamespaces: []string{"email", "jira"},
		Content: "eth0 inet addr:10.0.0.1 packets:42 txqueuelen:1000\nSee email:000001d8b21c$9b095c60$d11c1520$@example.com, and jira:OPS-7.\norder:1|PLACED_BY|customer:9"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"email:1", "customer:9", "email:000001d8b21c_9b095c60_d11c1520_@example.com", "jira:ops-7", "order:1"}
	if !slices.Equal(res.Nodes, want) {
		t.Fatalf("nodes %v, want %v", res.Nodes, want)
	}
}

// Text that reports on the graph (MentionsOnly) names relations without
// becoming their evidence: its refs are mentions, its syntax adds no edge.
func TestIngestMentionsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "result:t1", MentionsOnly: true,
		Content: "Related:\n- email:42 -[sent_by]-> person:ann\n- jira:OPS-1|blocks|jira:OPS-2"})
	if err != nil {
		t.Fatal(err)
	}
	edges, err := e.graph.For("acme").CountEdgesByType(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if edges["sent_by"]+edges["blocks"] != 0 || edges["mentions"] != 4 {
		t.Fatalf("edges %v (ingest %+v)", edges, res)
	}
}

// IngestBatch leaves the same graph and chunks as Ingest one request at a
// time: nodes and edges shared by several requests merged, a source's two
// versions in one batch written in order, and a request that cannot be
// ingested costing only itself.
func TestIngestBatchEqualsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	pad := strings.Repeat(" More words to read.", kb.ChunkTokens/8)
	reqs := []kb.IngestRequest{
		{Client: "acme", MainNode: "jira:TASK-1", Title: "Login fails", ObservedAt: at, Props: map[string]any{"status": "Open", "meta": map[string]any{"a": 1.0}},
			Header: "Reporter: person:ann", Relations: []kb.MetaRelation{{From: "jira:TASK-1", Type: "reported_by", To: "person:ann", Evidence: "Reporter: person:ann"}},
			Content: "Login fails after a reset; person:bob saw it too." + pad + "\n\nSee jira:TASK-2 for the cache." + pad},
		{Client: "acme", MainNode: "jira:TASK-2", Title: "Cache expiry", ObservedAt: at.Add(time.Minute),
			Content: "The cache keeps old credentials; person:bob and person:ann know." + pad + "\n\nRelated: jira:TASK-1 -[RELATES_TO]-> jira:TASK-2"},
		{Client: "acme", MainNode: "jira:TASK-3", Content: "   \n\t "}, // empty: refused
		{Client: "acme", MainNode: "confluence:runbook", SourceURN: "confluence:42", ObservedAt: at,
			Content: "Escalation: page person:carol first." + pad + "\n\nDatabases: service:orders-db for jira:TASK-1." + pad},
		// A mention of TASK-1 with props of its own, later: they overlay.
		{Client: "acme", MainNode: "jira:TASK-1", SourceURN: "jira:TASK-1#comment", ObservedAt: at.Add(2 * time.Minute), Props: map[string]any{"status": "Closed", "meta": map[string]any{"b": 2.0}},
			Content: "Fixed by person:bob in the session service; jira:TASK-2 was the cause."},
		{Client: "other", MainNode: "jira:TASK-1", ObservedAt: at, Content: "Another client's TASK-1, about person:bob."},
		{Client: "acme", MainNode: "bad ref with spaces", Content: "A main node that cannot be a ref."},
		// The runbook's second version in the same batch: drops carol and the database.
		{Client: "acme", MainNode: "confluence:runbook", SourceURN: "confluence:42", ObservedAt: at.Add(time.Hour),
			Content: "Escalation: page person:dan first." + pad},
	}
	one, batch := newEnv(t), newEnv(t)
	var wantErr []bool
	var want []kb.IngestResult
	for _, r := range reqs {
		res, err := one.kb.Ingest(ctx, r)
		want, wantErr = append(want, res), append(wantErr, err != nil)
	}
	got, errs := batch.kb.IngestBatch(ctx, reqs)
	if len(got) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("%d results, %d errors for %d requests", len(got), len(errs), len(reqs))
	}
	for i := range reqs {
		if (errs[i] != nil) != wantErr[i] {
			t.Errorf("request %d: batch error %v, one by one failed: %v", i, errs[i], wantErr[i])
		}
		if !slices.Equal(got[i].Chunks, want[i].Chunks) || !slices.Equal(got[i].Nodes, want[i].Nodes) || !slices.Equal(got[i].Edges, want[i].Edges) {
			t.Errorf("request %d: batch result %+v, one by one %+v", i, got[i], want[i])
		}
	}
	if !errors.Is(errs[2], kb.ErrEmptyContent) || !errors.Is(errs[6], kb.ErrBadRef) {
		t.Errorf("bad requests: %v, %v", errs[2], errs[6])
	}
	if got[7].RemovedChunks != 2 {
		t.Errorf("the second version removed %d chunks, want the first's 2", got[7].RemovedChunks)
	}
	for _, client := range []string{"acme", "other"} {
		wantNodes, err1 := one.graph.For(client).ListNodes(ctx, graph.NodeQuery{Limit: 1000})
		gotNodes, err2 := batch.graph.For(client).ListNodes(ctx, graph.NodeQuery{Limit: 1000})
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if len(gotNodes) != len(wantNodes) {
			t.Fatalf("%s: %d nodes in batch, %d one by one", client, len(gotNodes), len(wantNodes))
		}
		for i, n := range gotNodes {
			w := wantNodes[i]
			if n.Key != w.Key || !sameSet(n.RAGChunks, w.RAGChunks) || !n.FirstSeen.Equal(w.FirstSeen) || !n.LastSeen.Equal(w.LastSeen) || fmt.Sprint(n.Props) != fmt.Sprint(w.Props) {
				t.Errorf("%s: node %+v, one by one %+v", client, n, w)
			}
		}
		wantCounts, _ := one.graph.For(client).CountEdgesByType(ctx)
		gotCounts, _ := batch.graph.For(client).CountEdgesByType(ctx)
		if fmt.Sprint(gotCounts) != fmt.Sprint(wantCounts) {
			t.Errorf("%s: edges %v, one by one %v", client, gotCounts, wantCounts)
		}
		wantChunks, _ := one.chunks.For(client).Count(ctx)
		gotChunks, _ := batch.chunks.For(client).Count(ctx)
		if gotChunks != wantChunks {
			t.Errorf("%s: %d chunks, one by one %d", client, gotChunks, wantChunks)
		}
	}
	for _, key := range []string{"reported_by::jira:task-1->person:ann", "mentions::jira:task-1->jira:task-2", "relates_to::jira:task-1->jira:task-2", "mentions::jira:task-2->person:bob"} {
		w, err1 := one.graph.For("acme").Edge(ctx, key)
		g, err2 := batch.graph.For("acme").Edge(ctx, key)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !sameSet(g.EvidenceChunkIDs, w.EvidenceChunkIDs) || g.Confidence != w.Confidence || g.Origin != w.Origin || !g.FirstSeen.Equal(w.FirstSeen) || !g.LastSeen.Equal(w.LastSeen) {
			t.Errorf("edge %s: %+v, one by one %+v", key, g, w)
		}
	}
	if _, err := batch.graph.For("acme").Node(ctx, "person:carol"); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("the first version's person:carol survived the second in one batch: %v", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// An item's header chunk is its title as a vector (header lines would blur
// it); its text keeps the header lines for BM25, and the body's chunks are
// embedded with the title before their text.
func TestHeaderChunkVectorIsTheTitle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	title := "Login fails after password reset"
	req := kb.IngestRequest{Client: "acme", MainNode: "jira:TASK-9", Title: title,
		Header:  "Assignee: person:ann\nReporter: person:bob\nPriority: Critical",
		Content: "The session service rejects the new credentials until the cache expires."}
	res, err := e.kb.Ingest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	x := e.chunks.For("acme")
	chunks, err := x.Get(ctx, res.Chunks...)
	if err != nil || len(chunks) != 2 {
		t.Fatalf("%d chunks, %v; want the header's and the body's", len(chunks), err)
	}
	cosine := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	for _, c := range chunks {
		want := embedder().EmbedOne(title + "\n" + c.Text)
		if strings.HasPrefix(c.Text, "Assignee: person:ann") {
			want = embedder().EmbedOne(title)
		}
		if got := cosine(c.Vector, want); got < 0.9999 {
			t.Errorf("chunk %q: vector's cosine with the expected embedding %.4f", c.Text, got)
		}
	}
	// A query typed as the title finds the header chunk first by vectors.
	hits, err := x.NearVector(ctx, rag.Query{Vector: embedder().EmbedOne(title), Limit: 1})
	if err != nil || len(hits) != 1 || !strings.HasPrefix(hits[0].Chunk.Text, "Assignee:") {
		t.Fatalf("vector search by the title: %+v, %v", hits, err)
	}
}

// countingAliases is the real alias registry, its reads counted.
type countingAliases struct {
	store.Aliases
	one, many int
}

func (c *countingAliases) ResolveAlias(ctx context.Context, client, alias string) (string, error) {
	c.one++
	return c.Aliases.ResolveAlias(ctx, client, alias)
}

func (c *countingAliases) ResolveAliases(ctx context.Context, client string, aliases []string) (map[string]string, error) {
	c.many++
	return c.Aliases.ResolveAliases(ctx, client, aliases)
}

// TestBatchResolvesRefsInOneRead: a batch's refs are looked up in the
// alias registry in one read a client, not one by one; aliases the
// registry holds (recorded by another process, not in this KB's cache)
// apply, a main node written as an alias included (its relationships then
// read against what it stands for), and the batch writes what ingesting
// one by one does.
func TestBatchResolvesRefsInOneRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	for alias, canonical := range map[string]string{"user:jd": "user:john", "jira:old-1": "jira:ops-1"} {
		if err := e.store.RecordAlias(ctx, "acme", alias, canonical); err != nil {
			t.Fatal(err)
		}
	}
	reqs := []kb.IngestRequest{
		{Client: "acme", MainNode: "email:a", Content: "user:jd wrote about jira:ops-2 and person:ann.",
			Relations: []kb.MetaRelation{{From: "email:a", Type: "FROM", To: "user:jd"}}},
		{Client: "acme", MainNode: "jira:old-1", Content: "The outage.\n\nOPS-1|AFFECTS|service:login"},
		{Client: "globex", MainNode: "email:b", Content: "user:jd again."},
	}
	reg := &countingAliases{Aliases: e.store}
	k := kb.New(kb.Config{Graph: e.graph, Chunks: e.chunks, Embedder: embedder(), Aliases: reg})
	res, errs := k.IngestBatch(ctx, reqs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if reg.one != 0 || reg.many != 3 {
		t.Errorf("registry read %d times one by one and %d at once, want 0 and 3 (acme's refs, then what its aliases stand for; globex's)", reg.one, reg.many)
	}
	if !slices.Contains(res[0].Nodes, "user:john") || slices.Contains(res[0].Nodes, "user:jd") || !slices.Contains(res[0].Edges, "from::email:a->user:john") {
		t.Errorf("email:a: nodes %v, edges %v", res[0].Nodes, res[0].Edges)
	}
	if res[1].MainNode != "jira:ops-1" || !slices.Contains(res[1].Edges, "affects::jira:ops-1->service:login") {
		t.Errorf("jira:old-1: main %s, edges %v", res[1].MainNode, res[1].Edges)
	}
	if !slices.Contains(res[2].Nodes, "user:jd") {
		t.Errorf("globex resolved acme's alias: %v", res[2].Nodes)
	}
	// One by one, through a fresh KB over another directory, the same.
	o := newEnv(t)
	for alias, canonical := range map[string]string{"user:jd": "user:john", "jira:old-1": "jira:ops-1"} {
		if err := o.store.RecordAlias(ctx, "acme", alias, canonical); err != nil {
			t.Fatal(err)
		}
	}
	for i, req := range reqs {
		got, err := o.kb.Ingest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got.MainNode != res[i].MainNode || !slices.Equal(got.Nodes, res[i].Nodes) || !slices.Equal(got.Edges, res[i].Edges) || !slices.Equal(got.Chunks, res[i].Chunks) {
			t.Errorf("request %d one by one: %+v, in a batch %+v", i, got, res[i])
		}
	}
}

// An identity pass makes the resolver know every alias it found before it
// merges the first node: a batch whose edges meet one of the pass's merges
// re-resolves its ends (endsNow) and must find the others too. Each learned
// just before its own merge, the second alias still read as unaliased
// where a batch had looked it up before the pass.
func TestIdentityPassLearnsEveryAliasBeforeMerging(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	gs, err := graphsqlite.Open(ctx, filepath.Join(dir, graphsqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	aliases := []string{"person:ewan.h@home.test", "person:kim"}
	// At the first MergeNode: what the resolver says each alias stands for.
	var k *kb.KB
	var seen map[string]string
	cg := &hookGraph{Store: gs, beforeMerge: func(ctx context.Context, client string) error {
		if seen != nil {
			return nil
		}
		seen = map[string]string{}
		for _, a := range aliases {
			ref, err := k.Resolver().Resolve(ctx, client, a)
			if err != nil {
				return err
			}
			seen[a] = ref.String()
		}
		return nil
	}}
	all := embeddedtest.OpenWith(t, dir, embedded.Backends{Graph: cg})
	k = all.KB.KB
	if _, err := all.Store.PutClient(ctx, store.Client{ID: "acme", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, errs := all.KB.KB.IngestBatch(ctx, []kb.IngestRequest{{Client: "acme", MainNode: "jira:ops-9", SourceURN: "jira:ops-9",
		Content: "Rotate the keys.\n\nrelationships: [\n  \"jira:OPS-9|ASSIGNED_TO|person:kim\",\n  \"jira:OPS-9|MENTIONS|person:ewan.h@home.test\"\n]\n"}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// A batch looked both up before the pass: unaliased then.
	for _, a := range aliases {
		if ref, err := all.KB.KB.Resolver().Resolve(ctx, "acme", a); err != nil || ref.String() != a {
			t.Fatalf("%s before the pass: %v %v", a, ref, err)
		}
	}
	var facts []store.IdentityFact
	for _, fs := range [][]store.IdentityFact{
		author("ewan.h@home.test", "Ewan Harris", 3), author("ewan@work.test", "Ewan Harris", 1),
		account("kim", "Kim Park", 1), {fact("person:kim", store.FactEmail, "kim@d.test", "jira:ops-kim", 1)}, author("kim@d.test", "Kim Park", 2),
	} {
		facts = append(facts, fs...)
	}
	if err := all.Store.PutIdentityFactSets(ctx, []store.IdentityFactSet{{Client: "acme", Source: "test", Facts: facts}}); err != nil {
		t.Fatal(err)
	}
	res, err := all.KB.KB.ApplyIdentities(ctx, "acme", all.Store)
	if err != nil {
		t.Fatal(err)
	}
	if res.Merged != 2 {
		t.Fatalf("merged %d nodes, want 2 (%+v)", res.Merged, res.Aliases)
	}
	want := map[string]string{"person:ewan.h@home.test": "person:ewan@work.test", "person:kim": "person:kim@d.test"}
	if !maps.Equal(seen, want) {
		t.Fatalf("at the first merge the resolver said %v, want %v", seen, want)
	}
}
