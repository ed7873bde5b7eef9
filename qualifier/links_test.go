package qualifier_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/qualifier"
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
	if _, _, err := e.st.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "m1@acme.test", Raw: []byte(body),
		Normalized: store.Normalized{Title: "Coffee", Body: body, Metadata: map[string]any{"from": "ann@acme.test", "fromName": "Ann"}}}); err != nil {
		t.Fatal(err)
	}
	ix, _ := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond})
	runUntil(t, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == 1 }, e.st)
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
