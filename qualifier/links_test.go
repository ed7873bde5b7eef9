package qualifier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
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
