package qualifier_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/pollers/git"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

var fixesRE = regexp.MustCompile(`Fixes ([A-Z]+-[0-9]+)`)

type env struct {
	st    *sqlite.Store
	graph graph.Store
	kb    *kb.KB
}

func newEnv(t testing.TB) env {
	t.Helper()
	all := embeddedtest.Open(t, "")
	return env{st: all.Store, graph: all.Graph, kb: all.KB.KB}
}

// loadDemo stores the demo corpus files as client demo.
func loadDemo(t testing.TB, st store.Store) []store.Document {
	t.Helper()
	var docs []store.Document
	for _, dir := range []string{"email", "jira", "confluence"} {
		fs.WalkDir(deploy.Demo(), dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, _ := fs.ReadFile(deploy.Demo(), path)
			parsed, err := kinds.Default().Parse(path, raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range parsed {
				doc.Client = "demo"
				stored, _, err := st.PutDocument(context.Background(), doc)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, stored)
			}
			return nil
		})
	}
	// The git history, through the git source.
	repo := filepath.Join(t.TempDir(), "repo")
	if err := deploy.BuildDemoRepo(repo); err != nil {
		t.Fatal(err)
	}
	src, _ := git.New(git.Config{URL: repo, Dir: filepath.Join(t.TempDir(), "clone")})
	for cursor := ""; ; {
		b, err := src.Poll(context.Background(), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range b.Documents {
			doc.Client = "demo"
			stored, _, err := st.PutDocument(context.Background(), doc)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, stored)
		}
		if cursor = b.Cursor; !b.More {
			break
		}
	}
	return docs
}

// drain runs the indexers and the qualifier until no work is left.
func drain(t *testing.T, e env, users []string) { pipelinetest.Drain(t, e.st, e.kb, users) }

// The demo corpus qualified in batches (the default) and one task at a
// time: the same checks hold both ways.
func TestDemoCorpusWithTheRulesQualifier(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{qualifier.DefaultBatch, 1} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			t.Parallel()
			testDemoCorpus(t, batch)
		})
	}
}

func testDemoCorpus(t *testing.T, batch int) {
	e := newEnv(t)
	docs := loadDemo(t, e.st)
	pipelinetest.DrainWith(t, e.st, e.kb, qualifier.Config{Users: []string{"bob.smith@kestrel.test"}, Batch: batch})
	ctx := context.Background()
	st, _ := e.st.Stats(ctx)
	data := st.TasksByKind["DATA_PROCESSING"]
	if data["DONE"]+data["READY_FOR_GPU"] != int64(len(docs)) || data["FAILED"] != 0 || st.TasksByKind["LINK_PROCESSING"]["DONE"] == 0 ||
		st.TasksByKind["LINK_PROCESSING"]["FAILED"] != 0 {
		t.Fatalf("tasks: %+v (documents %d)", st.TasksByKind, len(docs))
	}
	t.Logf("routing: %d DONE, %d READY_FOR_GPU", data["DONE"], data["READY_FOR_GPU"])
	g := e.graph.For("demo")
	edges := 0
	for _, d := range docs {
		task, err := e.st.GetTask(ctx, "demo", store.TaskID(d.ID, store.KindData, ""))
		if err != nil {
			t.Fatal(err)
		}
		mem, err := e.st.GetTaskMemory(ctx, "demo", task.ID)
		if err != nil || mem.ContextSummary == "" || len(mem.GraphNodeKeys) == 0 || len(mem.RAGDocumentIDs) == 0 || string(mem.RoutingDecision) != string(task.State) {
			t.Fatalf("%s %s: memory %+v err %v", d.SourceType, d.ExternalID, mem, err)
		}
		main, _ := kb.ParseRef(kinds.Default().Shape(d).Main)
		m := d.Normalized.Metadata
		var want []string
		switch d.SourceType {
		case store.SourceEmail:
			want = append(want, graph.EdgeKey("sent_by", main.String(), "person:"+m["from"].(string)))
			if r, ok := m["inReplyTo"].(string); ok {
				parent, _ := kb.ParseRef("email:" + r)
				want = append(want, graph.EdgeKey("replies_to", main.String(), parent.String()))
			}
		case store.SourceJira:
			if a, ok := m["assignee"].(string); ok {
				want = append(want, graph.EdgeKey("assigned_to", main.String(), "person:"+a))
			}
			want = append(want, graph.EdgeKey("in_project", main.String(), "project:"+strings.ToLower(m["project"].(string))))
			links, _ := m["issueLinks"].([]any)
			for _, l := range links {
				link := l.(map[string]any)
				other := "jira:" + strings.ToLower(link["key"].(string))
				if other != main.String() {
					want = append(want, graph.EdgeKey(strings.ToLower(link["type"].(string)), main.String(), other))
				}
			}
		case store.SourceConfluence:
			want = append(want, graph.EdgeKey("in_space", main.String(), "space:"+strings.ToLower(m["space"].(string))))
		case store.SourceGit:
			if a, ok := m["author"].(string); ok {
				want = append(want, graph.EdgeKey("authored_by", main.String(), "person:"+a))
				for _, k := range fixesRE.FindAllStringSubmatch(d.Normalized.Body, -1) {
					want = append(want, graph.EdgeKey("fixes", main.String(), "jira:"+strings.ToLower(k[1])))
				}
			}
		}
		for _, key := range want {
			edge, err := g.Edge(ctx, key)
			if err != nil {
				t.Fatalf("%s %s: metadata edge %s: %v", d.SourceType, d.ExternalID, key, err)
			}
			if len(edge.EvidenceChunkIDs) == 0 || edge.Origin != graph.OriginMetadata || edge.Confidence != 1 {
				t.Fatalf("edge %+v", edge)
			}
			edges++
		}
	}
	if edges < len(docs) {
		t.Fatalf("%d metadata edges checked for %d documents", edges, len(docs))
	}
	counts, _ := g.CountByType(ctx)
	t.Logf("node types: %v", counts)
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "demo", Query: "offsite backups are days old"})
	if err != nil || len(pack.Items) == 0 || !strings.Contains(strings.ToLower(pack.Items[0].Content), "backup") {
		t.Fatalf("search over the demo: %v %+v", err, pack.Items[:min(1, len(pack.Items))])
	}
	t.Logf("search: %s", pack.Summary)
}

// BenchmarkQualify reports tasks/s qualified by the rules qualifier on the
// embedded store: the demo corpus's DATA and LINK tasks, ingest into the
// knowledge base included, after indexing: one task at a time and in
// batches (the default).
func BenchmarkQualify(b *testing.B) {
	for _, batch := range []int{1, qualifier.DefaultBatch} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) { benchmarkQualify(b, batch) })
	}
}

func benchmarkQualify(b *testing.B, batch int) {
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		docs := loadDemo(b, e.st)
		ix, _ := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond})
		runUntil(b, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == int64(len(docs)) }, e.st)
		s, _ := e.st.Stats(context.Background())
		tasks := s.Tasks["NEW"]
		q, _ := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Batch: batch, PollInterval: 10 * time.Millisecond})
		b.StartTimer()
		start := time.Now()
		runUntil(b, q, func(s store.Stats) bool {
			return s.Tasks["NEW"]+s.Tasks["QUALIFICATION_IN_PROGRESS"]+s.Tasks["RETRY"] == 0
		}, e.st)
		b.ReportMetric(float64(tasks)/time.Since(start).Seconds(), "tasks/s")
	}
}

// runUntil runs w until done holds for the store's stats.
// indexEmail stores an email from Ann and runs the indexers until it (the
// only document) is indexed and its tasks are queued.
func (e env) indexEmail(t *testing.T, externalID, title, body string) {
	t.Helper()
	e.indexEmailWith(t, nil, externalID, title, body)
}

// indexEmailWith is indexEmail with the indexer's links triaged by links.
func (e env) indexEmailWith(t *testing.T, links indexers.LinkTriage, externalID, title, body string) {
	t.Helper()
	if _, _, err := e.st.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: externalID, Raw: []byte(body),
		Normalized: store.Normalized{Title: title, Body: body, Metadata: map[string]any{"from": "ann@acme.test", "fromName": "Ann"}}}); err != nil {
		t.Fatal(err)
	}
	ix, _ := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond, Links: links})
	runUntil(t, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == 1 }, e.st)
}

func runUntil(t testing.TB, w interface{ Run(context.Context) error }, done func(store.Stats) bool, st store.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s, err := st.Stats(context.Background()); err == nil && done(s) {
			break
		}
	}
	cancel()
	wg.Wait()
}

// One relation that cannot be stored costs only itself: the issue is
// ingested, the task ends DONE, and its TaskMemory says what was left out.
// Content the knowledge base refuses fails the task at once, permanently,
// as malformed_input (never retried as transient). Prose mentions become
// nodes only in the rules' namespaces and the client's own.
func TestQualifyKeepsTheDocumentWhenOneRelationCannotBeStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.st.PutClient(ctx, store.Client{ID: "acme", Namespaces: []string{"order"}}); err != nil {
		t.Fatal(err)
	}
	put := func(d store.Document) store.Document {
		t.Helper()
		d.Client = "acme"
		stored, _, err := e.st.PutDocument(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	issue := put(store.Document{SourceType: store.SourceJira, ExternalID: "TIM-2", Raw: []byte("TIM-2"),
		Normalized: store.Normalized{Title: "TIM-2: Crash on start", Body: "Crashes for order:42, see https://ci.acme.test/job/7 inet addr:10.0.0.1 packets:3", Metadata: map[string]any{
			"key": "TIM-2", "assignee": "ann", "issueLinks": []any{
				map[string]any{"type": "Gantt: start-finish", "direction": "outward", "phrase": "starts after", "key": "TIM-3"},
				map[string]any{"type": "???", "direction": "outward", "phrase": "??", "key": "TIM-4"},
			}}}})
	binary := put(store.Document{SourceType: store.SourceFile, ExternalID: "noise.txt", Raw: []byte("noise"),
		Normalized: store.Normalized{Title: "noise", Body: strings.Repeat("\x01\x02\x03a", 50)}})
	drain(t, e, nil)

	task, _ := e.st.GetTask(ctx, "acme", store.TaskID(issue.ID, store.KindData, ""))
	mem, err := e.st.GetTaskMemory(ctx, "acme", task.ID)
	if task.State != store.TaskDone && task.State != store.TaskReadyForGPU || err != nil {
		t.Fatalf("issue task %s: %v", task.State, err)
	}
	if len(mem.Warnings) != 1 || !strings.Contains(mem.Warnings[0], "jira:TIM-2|???|jira:TIM-4 left out") {
		t.Fatalf("warnings %q", mem.Warnings)
	}
	g := e.graph.For("acme")
	for _, key := range []string{"gantt_start_finish::jira:tim-2->jira:tim-3", "assigned_to::jira:tim-2->person:ann", "mentions::jira:tim-2->order:42"} {
		if _, err := g.Edge(ctx, key); err != nil {
			t.Errorf("edge %s: %v", key, err)
		}
	}
	types, _ := g.CountByType(ctx)
	if types["inet"]+types["addr"]+types["packets"] != 0 {
		t.Errorf("prose made junk nodes: %v", types)
	}

	failed, _ := e.st.GetTask(ctx, "acme", store.TaskID(binary.ID, store.KindData, ""))
	if failed.State != store.TaskFailed || failed.Attempts != 1 || failed.LastError == nil || failed.LastError.Class != "malformed_input" || failed.LastError.Recoverable {
		t.Fatalf("binary content: %s after %d attempts, %+v", failed.State, failed.Attempts, failed.LastError)
	}
}

// A client whose chunks another embedder wrote (vectors of another
// dimension: the embedder changed without a wipe) cannot take this one's:
// the task fails at once, permanently, as malformed_input, saying what to
// do — not retried as if the store were down, and no panic.
func TestQualifyFailsPermanentlyOnAnotherEmbeddersChunks(t *testing.T) {
	t.Parallel()
	all := embeddedtest.Open(t, "")
	e := env{st: all.Store, graph: all.Graph, kb: all.KB.KB}
	ctx := t.Context()
	if err := all.Chunks.For("acme").Upsert(ctx, rag.Chunk{ID: "old", Text: "written by a 16-dimension model", SourceURN: "urn:old", Vector: make16()}); err != nil {
		t.Fatal(err)
	}
	doc, _, err := e.st.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: "TIM-9", Raw: []byte("TIM-9"),
		Normalized: store.Normalized{Title: "TIM-9: Build fails", Body: "The build fails on the release branch.", Metadata: map[string]any{"key": "TIM-9"}}})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e, nil)
	task, _ := e.st.GetTask(ctx, "acme", store.TaskID(doc.ID, store.KindData, ""))
	if task.State != store.TaskFailed || task.Attempts != 1 || task.LastError == nil || task.LastError.Class != "malformed_input" ||
		task.LastError.Recoverable || !strings.Contains(task.LastError.Message, "reprocess the client with a wipe") {
		t.Fatalf("task %s after %d attempts, %+v", task.State, task.Attempts, task.LastError)
	}
}

func make16() []float32 {
	v := make([]float32, 16)
	for i := range v {
		v[i] = float32(i + 1)
	}
	return v
}

// With possible duplicates on, an issue like an earlier one is joined to
// it by one possible_duplicate edge (origin similarity, evidence from both
// sides); items of kinds that do not duplicate one another (mail) and
// issues a person already linked get none. A redone task writes it once.
func TestPossibleDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	put := func(src store.SourceType, id, title, body string, meta map[string]any) {
		t.Helper()
		if _, _, err := e.st.PutDocument(ctx, store.Document{Client: "acme", SourceType: src, ExternalID: id, Raw: []byte(id),
			Normalized: store.Normalized{Title: title, Body: body, Metadata: meta}}); err != nil {
			t.Fatal(err)
		}
	}
	// First a project's other issues, each on a topic of its own: a BM25
	// IDF over a handful of documents that all share their words is ~0 (the
	// issues below would be alike or not depending on which was qualified
	// first).
	topics := []string{"Keyboard covers the login field on small phones", "Push notifications arrive twice after an upgrade",
		"Map tiles stay blank offline", "Video playback stutters over Bluetooth audio", "Localized dates use the wrong calendar",
		"Webview ignores the proxy settings", "Build fails with the newest SDK tools", "Scrolling lists leak memory",
		"Accessibility labels missing on icons", "Deep links open the wrong screen", "Battery drain from location updates",
		"Fonts render blurry on tablets", "Background sync stops after a reboot", "Uploads time out on slow networks",
		"Clipboard paste loses formatting", "Printing cuts the last page", "Dark splash screen flashes white",
		"Biometric prompt shows twice", "Search box forgets recent queries", "Charts draw outside their frame"}
	for i, title := range topics {
		put(store.SourceJira, fmt.Sprintf("TIM-%d", 100+i), title, title+".", map[string]any{"key": fmt.Sprintf("TIM-%d", 100+i)})
	}
	background := int64(len(topics))
	qualify := func(docs int64) {
		t.Helper()
		ix, _ := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond})
		runUntil(t, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == docs }, e.st)
		// One task at a time: two issues qualified at once can each find
		// the other's chunks before its edges are written (a clone gets a
		// possible_duplicate too: known, see the README's limits).
		q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, PossibleDuplicates: 0.3, Concurrency: 1, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runUntil(t, q, func(s store.Stats) bool { return s.Tasks["DONE"]+s.Tasks["READY_FOR_GPU"] == docs }, e.st)
	}
	qualify(background)

	const crash = "The app crashes on start when the camera permission was denied before; the stack trace ends in CameraModule.open."
	put(store.SourceJira, "TIM-1", "Crash on start after camera permission denied", crash, map[string]any{"key": "TIM-1"})
	put(store.SourceJira, "TIM-2", "App crashes at start when camera permission is denied", "Crash at start: camera permission denied before, CameraModule.open in the trace.", map[string]any{"key": "TIM-2"})
	put(store.SourceJira, "TIM-3", "Crash on start after camera permission denied (iOS)", crash, map[string]any{"key": "TIM-3",
		"issueLinks": []any{map[string]any{"type": "Cloners", "direction": "outward", "phrase": "clones", "key": "TIM-1"}}})
	put(store.SourceJira, "TIM-4", "Dark mode for the settings page", "The settings page should follow the system's dark mode.", map[string]any{"key": "TIM-4"})
	put(store.SourceEmail, "m1@acme.test", "Crash on start after camera permission denied", crash, map[string]any{"from": "ann@acme.test"})
	put(store.SourceEmail, "m2@acme.test", "Re: Crash on start after camera permission denied", crash, map[string]any{"from": "bob@acme.test"})
	qualify(background + 6)

	g := e.graph.For("acme")
	counts, _ := g.CountEdgesByType(ctx)
	key := graph.EdgeKey(kb.EdgePossibleDuplicate, "jira:tim-1", "jira:tim-2")
	edge, err := g.Edge(ctx, key)
	if err != nil || edge.Origin != graph.OriginSimilarity || edge.Confidence < 0.3 || len(edge.EvidenceChunkIDs) != 2 {
		t.Fatalf("edge %s: %+v %v", key, edge, err)
	}
	if counts[kb.EdgePossibleDuplicate] != 2 { // tim-1–tim-2 and tim-2–tim-3; tim-3 clones tim-1
		hood, _ := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"jira:tim-1", "jira:tim-3", "email:m1@acme.test"}, Depth: 1, EdgeTypes: []string{kb.EdgePossibleDuplicate}})
		t.Fatalf("%d possible_duplicate edges: %+v", counts[kb.EdgePossibleDuplicate], hood.Edges)
	}
	if _, err := g.Edge(ctx, graph.EdgeKey(kb.EdgePossibleDuplicate, "jira:tim-1", "jira:tim-3")); err == nil {
		t.Fatal("a possible duplicate of an issue that clones it")
	}
}
