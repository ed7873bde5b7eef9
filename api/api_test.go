package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/kb/graph"
)

// tenant is what one client has in the fixture: a key and the IDs of its
// node, edge, chunk, document and task.
type tenant struct {
	key, node, edge, chunk, doc, task string
}

type fixture struct {
	url          string
	admin        string
	acme, globex tenant
	st           *sqlite.Store
	kb           *kb.KB
	server       *api.Server
	patterns     []string
}

func newFixture(t *testing.T, tweak func(*api.Config)) fixture {
	t.Helper()
	ctx := context.Background()
	all := embeddedtest.Open(t, "")
	st, k, g, c := all.Store, all.KB.KB, all.Graph, all.Chunks
	f := fixture{st: st, kb: k}
	var err error
	if f.admin, err = api.EnsureAdminKey(ctx, st, ""); err != nil || !strings.HasPrefix(f.admin, api.KeyPrefix) {
		t.Fatalf("admin key %q %v", f.admin, err)
	}
	// Both clients hold the same kind of data under the same names, so a
	// leak would look like a success.
	for _, tc := range []struct {
		client string
		tn     *tenant
		text   string
	}{
		{"acme", &f.acme, "The espresso machine needs descaling every month; Ann owns the maintenance schedule."},
		{"globex", &f.globex, "The espresso machine in the Globex lobby is broken; Ann ordered a replacement grinder."},
	} {
		if _, err := st.PutClient(ctx, store.Client{ID: tc.client, Name: tc.client}); err != nil {
			t.Fatal(err)
		}
		secret, key, err := api.NewKey(store.RoleClient, tc.client, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateAPIKey(ctx, key); err != nil {
			t.Fatal(err)
		}
		doc, _, err := st.PutDocument(ctx, store.Document{Client: tc.client, SourceType: store.SourceEmail, ExternalID: "m1@" + tc.client + ".test",
			Raw: []byte(tc.text), Normalized: store.Normalized{Title: "Espresso", Body: tc.text}})
		if err != nil {
			t.Fatal(err)
		}
		main := "email:" + doc.ExternalID
		res, err := k.Ingest(ctx, kb.IngestRequest{Client: tc.client, MainNode: main, Title: doc.Normalized.Title, Content: tc.text,
			Relations: []kb.MetaRelation{{From: "person:ann", Type: "sent", To: main}}, SourceURN: doc.SourceURN(), SourceType: "EMAIL"})
		if err != nil {
			t.Fatal(err)
		}

		if _, err := st.EnqueueTasks(ctx, store.Task{Kind: store.KindData, Client: tc.client, SourceDoc: doc.ID, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		taskID := store.TaskID(doc.ID, store.KindData, "")
		if err := st.SaveTaskMemory(ctx, store.TaskMemory{TaskID: taskID, Client: tc.client, ContextSummary: tc.text, RoutingDecision: store.TaskDone,
			RoutingReason: "informational", SourceType: store.SourceEmail, SourceID: doc.ID}); err != nil {
			t.Fatal(err)
		}
		*tc.tn = tenant{key: secret, node: res.MainNode, edge: graph.EdgeKey("sent", "person:ann", res.MainNode), chunk: res.Chunks[0], doc: doc.ID, task: taskID}
	}
	cfg := api.Config{Store: st, KB: k, Graph: g, Chunks: c, Logger: slog.New(slog.DiscardHandler)}
	if tweak != nil {
		tweak(&cfg)
	}
	s := api.New(cfg)
	f.server = s
	mux := http.NewServeMux()
	s.Register(mux)
	f.patterns = s.Patterns()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// call makes one request and decodes the JSON answer.
func call(t *testing.T, method, u, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %s", method, u, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, out
}

func errorOf(body map[string]any) (code, field string) {
	e, _ := body["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

// clientRoutes are every client route, filled with a tenant's IDs.
func clientRoutes(tn tenant) []struct{ method, path, body string } {
	esc := url.PathEscape
	return []struct{ method, path, body string }{
		{"POST", "/api/v1/search", `{"query":"espresso machine"}`},
		{"GET", "/api/v1/search?query=espresso+machine", ""},
		{"GET", "/api/v1/nodes?type=email", ""},
		{"GET", "/api/v1/nodes/" + esc(tn.node), ""},
		{"GET", "/api/v1/nodes/" + esc(tn.node) + "/neighbors?depth=1", ""},
		{"GET", "/api/v1/nodes/" + esc(tn.node) + "/aliases", ""},
		{"GET", "/api/v1/paths?from=person:ann&to=" + url.QueryEscape(tn.node), ""},
		{"GET", "/api/v1/edges/" + esc(tn.edge), ""},
		{"GET", "/api/v1/chunks/" + esc(tn.chunk), ""},
		{"GET", "/api/v1/documents", ""},
		{"GET", "/api/v1/documents/" + esc(tn.doc), ""},
		{"GET", "/api/v1/documents/" + esc(tn.doc) + "/similar?limit=3", ""},
		{"GET", "/api/v1/tasks?kind=DATA_PROCESSING", ""},
		{"GET", "/api/v1/tasks/" + esc(tn.task), ""},
	}
}
