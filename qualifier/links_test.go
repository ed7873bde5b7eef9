package qualifier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/urgency"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/agent"
	"github.com/jervis-dev/jervis/qualifier/linksafety"
)

type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func TestLinksAreClassifiedRecordedAndSafeOnesFetched(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Espresso machine manual</title></head><body><p>Descale the espresso machine monthly with citric acid.
			Spare parts: <a href="https://parts.example.test/gaskets">gaskets</a>.</p></body></html>`)
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range []store.LinkPattern{{Client: "acme", Kind: store.LinkAllow, Pattern: "manuals.acme.test"}, {Client: "acme", Kind: store.LinkBlock, Pattern: "tracker.test"}} {
		if err := e.st.AddLinkPattern(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	safe := "http://manuals.acme.test" + port + "/espresso"
	body := "The machine manual is at " + safe + " and ignore the pixel https://ads.tracker.test/p.gif?id=7 — news at https://news.example.com/today."
	e.indexEmail(t, "m1@acme.test", "Coffee", body)
	fetcher := &linksafety.Fetcher{AllowLoopback: true, Resolver: resolver{"manuals.acme.test": {netip.MustParseAddr("127.0.0.1")}}}
	q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Fetcher: fetcher, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, q, func(s store.Stats) bool { return s.Tasks["DONE"]+s.Tasks["READY_FOR_GPU"] == 4 }, e.st)

	st, _ := e.st.Stats(ctx)
	if st.TasksByKind["LINK_PROCESSING"]["DONE"] != 3 || st.Tasks["NEW"] != 0 {
		t.Fatalf("tasks %+v: the fetched page's own link must not be queued", st.TasksByKind)
	}
	reasons := map[string]string{}
	docID := store.DocumentID("acme", store.SourceEmail, "m1@acme.test", store.ContentHash([]byte(body)))
	for _, u := range []string{safe, "https://ads.tracker.test/p.gif?id=7", "https://news.example.com/today"} {
		mem, err := e.st.GetTaskMemory(ctx, "acme", store.TaskID(docID, store.KindLink, u))
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		reasons[u] = mem.RoutingReason
	}
	if !strings.HasPrefix(reasons[safe], "SAFE") || !strings.HasSuffix(reasons[safe], "fetched") ||
		!strings.HasPrefix(reasons["https://ads.tracker.test/p.gif?id=7"], "UNSAFE (block pattern tracker.test)") ||
		!strings.HasPrefix(reasons["https://news.example.com/today"], "UNCERTAIN") {
		t.Fatalf("reasons: %v", reasons)
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "how to descale the espresso machine"})
	if err != nil || len(pack.Items) == 0 || !strings.Contains(pack.Items[0].Content, "citric acid") {
		t.Fatalf("fetched page not searchable: %v %+v", err, pack.Items)
	}
	link, _ := kb.ParseRef("link:" + safe)
	source, _ := kb.ParseRef("email:m1@acme.test")
	edge, err := e.graph.For("acme").Edge(ctx, graph.EdgeKey("found_in", link.String(), source.String()))
	if err != nil || len(edge.EvidenceChunkIDs) == 0 {
		t.Fatalf("found_in edge: %+v %v", edge, err)
	}
}

// linkModel answers /api/chat like Ollama with structured output: fetch for
// links under docs.example.test, skip otherwise. It checks that the request
// asks for the answer schema.
func linkModel(t *testing.T, calls *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Format   json.RawMessage `json:"format"`
			Messages []struct{ Content string }
		}
		json.NewDecoder(r.Body).Decode(&req)
		answer := `{"decision":"skip","reason":"a newsletter tracking link"}`
		_, link, _ := strings.Cut(req.Messages[len(req.Messages)-1].Content, "\n")
		if link, _, _ = strings.Cut(link, "\n"); strings.Contains(link, "docs.example.test") {
			answer = `{"decision":"fetch","reason":"vendor documentation the email relies on"}`
		}
		if !strings.Contains(string(req.Format), `"enum":["fetch","skip"]`) {
			answer = "no schema in the request"
		}
		json.NewEncoder(w).Encode(map[string]any{"model": "m", "created_at": "2026-11-21T15:00:00Z", "done": true,
			"message": map[string]any{"role": "assistant", "content": answer}, "prompt_eval_count": 120, "eval_count": 15})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestUncertainLinksDecidedByTheModel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Grinder calibration</title></head><body><p>Calibrate the burr grinder to 250 microns for espresso.</p></body></html>`)
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	e := newEnv(t)
	ctx := context.Background()
	docs := "http://docs.example.test" + port + "/grinder"
	news := "http://mail.example.test" + port + "/t/9f2c"
	body := "Grinder settings: " + docs + " (from the vendor). Newsletter: " + news + " — thanks."
	e.indexEmail(t, "m2@acme.test", "Grinder", body)
	var calls atomic.Int32
	ag, err := agent.New(agent.Config{Host: linkModel(t, &calls), Model: "m", KB: e.kb, Cache: e.st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, UncertainLinks: qualifier.PolicyModel}); err == nil {
		t.Fatal("the model policy without a model must be refused")
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	fetcher := &linksafety.Fetcher{AllowLoopback: true, Resolver: resolver{"docs.example.test": {loopback}, "mail.example.test": {loopback}}}
	// The default policy (auto) is the model's decision when a model is configured.
	q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Agent: ag, Fetcher: fetcher, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, q, func(s store.Stats) bool { return s.TasksByKind["LINK_PROCESSING"]["DONE"] == 2 }, e.st)
	docID := store.DocumentID("acme", store.SourceEmail, "m2@acme.test", store.ContentHash([]byte(body)))
	for u, want := range map[string]string{docs: "; model: vendor documentation the email relies on): fetched", news: "; model: a newsletter tracking link): recorded, not fetched"} {
		id := store.TaskID(docID, store.KindLink, u)
		mem, err := e.st.GetTaskMemory(ctx, "acme", id)
		if err != nil || !strings.HasPrefix(mem.RoutingReason, "UNCERTAIN") || !strings.HasSuffix(mem.RoutingReason, want) {
			t.Fatalf("%s: %q %v, want ...%q", u, mem.RoutingReason, err, want)
		}
		task, _ := e.st.GetTask(ctx, "acme", id)
		if task.Usage.ModelCalls != 1 || task.Usage.PromptTokens != 120 {
			t.Fatalf("%s: usage %+v", u, task.Usage)
		}
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "burr grinder calibration microns"})
	if err != nil || len(pack.Items) == 0 || !strings.Contains(pack.Items[0].Content, "250 microns") {
		t.Fatalf("the page the model chose is not searchable: %v %+v", err, pack.Items)
	}
	// The answers are cached: deciding again costs no model call.
	before := calls.Load()
	d, err := ag.DecideLink(ctx, news, "Newsletter: "+news)
	if err != nil || d.Fetch {
		t.Fatalf("decision %+v %v", d, err)
	}
	if d2, _ := ag.DecideLink(ctx, news, "Newsletter: "+news); !d2.FromCache || calls.Load() != before+1 {
		t.Fatalf("second decision %+v: %d model calls, want 1", d2, calls.Load()-before)
	}
}

// shapeCounter counts its kind's Shape calls.
type shapeCounter struct {
	pollers.Kind
	calls *atomic.Int32
}

func (k shapeCounter) Shape(d store.Document) pollers.Shape {
	k.calls.Add(1)
	return k.Kind.Shape(d)
}

// A document's data task and its link tasks, qualified in one batch, read
// its shape (its metadata decoded) once, not once for each.
func TestABatchReadsADocumentsShapeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.indexEmail(t, "m1@acme.test", "Links", "See https://a.example.com/1, https://b.example.com/2 and https://c.example.com/3.")
	var calls atomic.Int32
	var builtin []pollers.Kind
	for _, k := range kinds.Builtin() {
		if k.About().SourceType == store.SourceEmail {
			k = shapeCounter{Kind: k, calls: &calls}
		}
		builtin = append(builtin, k)
	}
	reg, err := pollers.NewRegistry(builtin...)
	if err != nil {
		t.Fatal(err)
	}
	q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Kinds: reg, Batch: 16, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, q, func(s store.Stats) bool { return s.Tasks["DONE"]+s.Tasks["READY_FOR_GPU"] == 4 }, e.st)
	st, _ := e.st.Stats(context.Background())
	if st.TasksByKind["LINK_PROCESSING"]["DONE"] != 3 {
		t.Fatalf("tasks %+v, want 3 links done", st.TasksByKind)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the document's shape was read %d times, want once", n)
	}
}

// A link the qualifier would only record (UNSAFE, or UNCERTAIN under the
// record policy) is recorded by its document's DATA_PROCESSING task, its
// own task made DONE when indexed and never claimed; it writes exactly
// what that task would have: the same link node, evidence chunk and
// found_in edge, and a TaskMemory that says so. A SAFE link's task runs
// on its own and fetches. Under a policy that fetches UNCERTAIN links,
// the DATA_PROCESSING task sends such a link's task back to NEW, to be
// fetched on its own.
func TestLinksRecordedWithTheirDocument(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "Page at "+r.URL.Path+": descale the espresso machine monthly.")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	safe, unsafe, uncertain := "http://manuals.acme.test"+port+"/espresso", "https://ads.tracker.test/p.gif?id=7", "http://news.example.test"+port+"/today"
	body := "The manual is at " + safe + ", ignore the pixel " + unsafe + " — news at " + uncertain + "."
	docID := store.DocumentID("acme", store.SourceEmail, "m1@acme.test", store.ContentHash([]byte(body)))
	fetcher := &linksafety.Fetcher{AllowLoopback: true, Resolver: resolver{"manuals.acme.test": {netip.MustParseAddr("127.0.0.1")}, "news.example.test": {netip.MustParseAddr("127.0.0.1")}}}
	ctx := context.Background()
	run := func(t *testing.T, triage bool, policy string) env {
		e := newEnv(t)
		for _, p := range []store.LinkPattern{{Client: "acme", Kind: store.LinkAllow, Pattern: "manuals.acme.test"}, {Client: "acme", Kind: store.LinkBlock, Pattern: "tracker.test"}} {
			if err := e.st.AddLinkPattern(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		var links indexers.LinkTriage
		if triage {
			var err error
			if links, err = qualifier.LinkTriage(e.st, qualifier.PolicyRecord, false); err != nil {
				t.Fatal(err)
			}
		}
		e.indexEmailWith(t, links, "m1@acme.test", "Coffee", body)
		if triage {
			for u, want := range map[string]store.TaskState{safe: store.TaskNew, unsafe: store.TaskDone, uncertain: store.TaskDone} {
				if task, err := e.st.GetTask(ctx, "acme", store.TaskID(docID, store.KindLink, u)); err != nil || task.State != want {
					t.Fatalf("%s indexed: %s, want %s (%v)", u, task.State, want, err)
				}
			}
		}
		q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Fetcher: fetcher, UncertainLinks: policy, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runUntil(t, q, func(s store.Stats) bool {
			return s.TasksByKind["LINK_PROCESSING"]["DONE"] == 3 && s.TasksByKind["DATA_PROCESSING"]["NEW"]+s.Tasks["QUALIFICATION_IN_PROGRESS"]+s.Tasks["RETRY"] == 0
		}, e.st)
		return e
	}
	memory := func(t *testing.T, e env, u string) store.TaskMemory {
		t.Helper()
		m, err := e.st.GetTaskMemory(ctx, "acme", store.TaskID(docID, store.KindLink, u))
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		return m
	}
	own, with := run(t, false, qualifier.PolicyRecord), run(t, true, qualifier.PolicyRecord)
	source, _ := kb.ParseRef("email:m1@acme.test")
	for _, u := range []string{safe, unsafe, uncertain} {
		a, b := memory(t, own, u), memory(t, with, u)
		if !slices.Equal(a.GraphNodeKeys, b.GraphNodeKeys) || !slices.Equal(a.RAGDocumentIDs, b.RAGDocumentIDs) || len(b.RAGDocumentIDs) == 0 || a.ContextSummary != b.ContextSummary {
			t.Fatalf("%s: recorded with its document %+v, on its own %+v", u, b, a)
		}
		link, _ := kb.ParseRef("link:" + u)
		key := graph.EdgeKey("found_in", link.String(), source.String())
		ea, err1 := own.graph.For("acme").Edge(ctx, key)
		eb, err2 := with.graph.For("acme").Edge(ctx, key)
		if err1 != nil || err2 != nil || !slices.Equal(ea.EvidenceChunkIDs, eb.EvidenceChunkIDs) {
			t.Fatalf("%s found_in: %+v %v, on its own %+v %v", u, eb, err2, ea, err1)
		}
	}
	if r := memory(t, with, unsafe).RoutingReason; r != "UNSAFE (block pattern tracker.test): recorded with its document, not fetched" {
		t.Fatalf("the UNSAFE link's reason: %q", r)
	}
	if r := memory(t, with, uncertain).RoutingReason; !strings.HasPrefix(r, "UNCERTAIN") || !strings.HasSuffix(r, "recorded with its document, not fetched") {
		t.Fatalf("the UNCERTAIN link's reason: %q", r)
	}
	if r := memory(t, with, safe).RoutingReason; !strings.HasPrefix(r, "SAFE") || !strings.HasSuffix(r, "fetched") {
		t.Fatalf("the SAFE link's reason: %q", r)
	}

	// Indexed under the record policy, qualified under fetch.
	later := run(t, true, qualifier.PolicyFetch)
	if r := memory(t, later, uncertain).RoutingReason; !strings.HasPrefix(r, "UNCERTAIN") || !strings.HasSuffix(r, ": fetched") {
		t.Fatalf("the UNCERTAIN link under the fetch policy: %q", r)
	}
	task, err := later.st.GetTask(ctx, "acme", store.TaskID(docID, store.KindLink, uncertain))
	if err != nil || task.Attempts != 1 {
		t.Fatalf("the link sent back ran %d times: %v", task.Attempts, err)
	}
	if r := memory(t, later, unsafe).RoutingReason; !strings.HasSuffix(r, "recorded with its document, not fetched") {
		t.Fatalf("the UNSAFE link under the fetch policy: %q", r)
	}
	pack, err := later.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: "descale espresso page today"})
	if err != nil || !slices.ContainsFunc(pack.Items, func(it kb.Item) bool { return strings.Contains(it.Content, "Page at /today") }) {
		t.Fatalf("the page of the link sent back is not searchable: %v %+v", err, pack.Items)
	}
}

// While live documents come, a batch whose data tasks carry more recorded
// links than one write takes is written in parts, and each link's results
// reach its own TaskMemory: its chunk is its found_in edge's evidence.
func TestRecordedLinksOfABatchWrittenInParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	links, err := qualifier.LinkTriage(e.st, qualifier.PolicyRecord, false)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for i := range 6 {
		id := fmt.Sprintf("m%d@acme.test", i)
		body := fmt.Sprintf("Build %d: see https://ci.example.com/%d/log, https://wiki.example.com/%d and https://github.com/acme/app/pull/%d.", i, i, i, i)
		if _, _, err := e.st.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: id, Raw: []byte(body),
			Normalized: store.Normalized{Title: "Build", Body: body, Metadata: map[string]any{"from": "ann@acme.test"}}}); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, store.DocumentID("acme", store.SourceEmail, id, store.ContentHash([]byte(body))))
	}
	ix, _ := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond, Links: links})
	runUntil(t, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == 6 }, e.st)
	// Batches of 2 tasks (8 grown): while live documents come, writes of
	// at most 4 requests, a task's 4.
	q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, Batch: 2, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	live, stop := time.NewTicker(10*time.Millisecond), make(chan struct{})
	defer live.Stop()
	go func() {
		for {
			urgency.With(ctx) // as a live document's work does
			select {
			case <-live.C:
			case <-stop:
				return
			}
		}
	}()
	runUntil(t, q, func(s store.Stats) bool {
		return s.TasksByKind["DATA_PROCESSING"]["NEW"]+s.Tasks["QUALIFICATION_IN_PROGRESS"] == 0
	}, e.st)
	close(stop)
	for i, doc := range docs {
		source, _ := kb.ParseRef(fmt.Sprintf("email:m%d@acme.test", i))
		for _, u := range []string{fmt.Sprintf("https://ci.example.com/%d/log", i), fmt.Sprintf("https://wiki.example.com/%d", i), fmt.Sprintf("https://github.com/acme/app/pull/%d", i)} {
			mem, err := e.st.GetTaskMemory(ctx, "acme", store.TaskID(doc, store.KindLink, u))
			if err != nil || len(mem.RAGDocumentIDs) != 1 {
				t.Fatalf("%s: %+v %v", u, mem, err)
			}
			link, _ := kb.ParseRef("link:" + u)
			edge, err := e.graph.For("acme").Edge(ctx, graph.EdgeKey("found_in", link.String(), source.String()))
			if err != nil || !slices.Equal(edge.EvidenceChunkIDs, mem.RAGDocumentIDs) {
				t.Fatalf("%s found_in: %+v %v; its memory's chunks %v", u, edge, err, mem.RAGDocumentIDs)
			}
		}
	}
}
