package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

func TestClientRoutesAnswerWithTheKeysClientData(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, r := range clientRoutes(f.acme) {
		code, body := call(t, r.method, f.url+r.path, f.acme.key, r.body)
		if code != http.StatusOK {
			t.Fatalf("%s %s: %d %v", r.method, r.path, code, body)
		}
		if s := fmt.Sprint(body); strings.Contains(s, "Globex") || strings.Contains(s, "globex") {
			t.Fatalf("%s %s: acme's answer carries globex's data: %s", r.method, r.path, s)
		}
	}
	_, pack := call(t, "POST", f.url+"/api/v1/search", f.acme.key, `{"query":"espresso descaling","limit":5,"expand":1,"fusion":"relativeScore","alpha":0.5}`)
	items, _ := pack["items"].([]any)
	if len(items) == 0 || !strings.Contains(fmt.Sprint(items[0]), "descaling") {
		t.Fatalf("search: %v", pack)
	}
	// Items by default, each with its passages; passages on request.
	for group, kind := range map[string]string{"": "item", "item": "item", "passage": "passage"} {
		_, pack := call(t, "GET", f.url+"/api/v1/search?query=espresso+descaling&group="+group, f.acme.key, "")
		items, _ := pack["items"].([]any)
		first, _ := items[0].(map[string]any)
		if first["kind"] != kind || (kind == "item") != (first["passages"] != nil) {
			t.Fatalf("group %q: %v", group, first)
		}
	}
	// The best item holds the query: its words are fed back, and named;
	// feedback=false ranks by the query alone.
	for path, want := range map[string]bool{"/api/v1/search?query=espresso+descaling": true, "/api/v1/search?query=espresso+descaling&feedback=false": false} {
		_, pack := call(t, "GET", f.url+path, f.acme.key, "")
		if fq, _ := pack["feedback"].(string); (fq != "") != want || want && !strings.Contains(fq, "descaling") {
			t.Fatalf("%s: feedback %q", path, fq)
		}
	}
	// Title agreement ranks the items too, a stage of its own; titles=false
	// (or a body's "titles": false) leaves it out.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/search?query=espresso+descaling", ""}, {"GET", "/api/v1/search?query=espresso+descaling&titles=false", ""},
		{"POST", "/api/v1/search", `{"query":"espresso descaling"}`}, {"POST", "/api/v1/search", `{"query":"espresso descaling","titles":false}`},
	} {
		_, pack := call(t, r.method, f.url+r.path, f.acme.key, r.body)
		timings, _ := pack["timingsMs"].(map[string]any)
		off := strings.Contains(r.path+r.body, "false")
		if _, ran := timings["titles"]; ran == off || timings["total"] == nil {
			t.Fatalf("%s %s%s: timings %v", r.method, r.path, r.body, timings)
		}
	}
	_, edge := call(t, "GET", f.url+"/api/v1/edges/"+url.PathEscape(f.acme.edge), f.acme.key, "")
	if ev, _ := edge["evidence"].([]any); len(ev) == 0 || edge["key"] != f.acme.edge {
		t.Fatalf("edge without its evidence text: %v", edge)
	}
	_, task := call(t, "GET", f.url+"/api/v1/tasks/"+f.acme.task, f.acme.key, "")
	if mem, _ := task["memory"].(map[string]any); mem["routingReason"] != "informational" || len(task["events"].([]any)) == 0 {
		t.Fatalf("task without memory or events: %v", task)
	}
	_, docs := call(t, "GET", f.url+"/api/v1/documents?state=NEW&sourceType=EMAIL", f.acme.key, "")
	if items, _ := docs["items"].([]any); len(items) != 1 {
		t.Fatalf("documents: %v", docs)
	}
}

// TestSimilarDocuments asks for the items like a document: the whole
// document is the query, the document itself is left out, and another
// client's like item is never seen.
func TestSimilarDocuments(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	for _, client := range []string{"acme", "globex"} {
		if _, err := f.kb.Ingest(ctx, kb.IngestRequest{Client: client, MainNode: "jira:" + client + "-7", Title: "Espresso machine maintenance",
			Content: "Schedule the espresso machine descaling for " + client + " every month.", SourceType: "JIRA", Kind: kb.KindBody}); err != nil {
			t.Fatal(err)
		}
	}
	code, similar := call(t, "GET", f.url+"/api/v1/documents/"+f.acme.doc+"/similar?limit=5", f.acme.key, "")
	items, _ := similar["items"].([]any)
	if code != http.StatusOK || len(items) != 1 || len(similar["self"].([]any)) == 0 {
		t.Fatalf("similar: %d %v", code, similar)
	}
	it := items[0].(map[string]any)
	if score, _ := it["score"].(float64); it["sourceUrn"] != "jira:acme-7" || score <= 0 || score > 1 || len(it["passages"].([]any)) == 0 {
		t.Fatalf("similar item: %v", it)
	}
	// A document not in the knowledge base (never qualified) says so.
	doc, _, err := f.st.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "m2@acme.test",
		Raw: []byte("x"), Normalized: store.Normalized{Title: "Espresso", Body: "The espresso machine again."}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "GET", f.url+"/api/v1/documents/"+doc.ID+"/similar", f.acme.key, ""); code != http.StatusConflict || !strings.Contains(fmt.Sprint(body), "not in the knowledge base") {
		t.Fatalf("similar of a document not indexed: %d %v", code, body)
	}
	if code, body := call(t, "GET", f.url+"/api/v1/documents/"+f.acme.doc+"/similar?limit=0", f.acme.key, ""); code != http.StatusBadRequest {
		t.Fatalf("limit 0: %d %v", code, body)
	}
}

// TestTenantIsolation uses client A's key on client B's IDs: every answer is
// 404, never B's data and never 403 (which would confirm the ID exists).
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, r := range clientRoutes(f.globex) {
		if strings.HasPrefix(r.path, "/api/v1/search") || r.path == "/api/v1/documents" || strings.Contains(r.path, "?type=") || strings.HasPrefix(r.path, "/api/v1/tasks?") {
			continue // no ID to cross: checked below
		}
		code, body := call(t, r.method, f.url+r.path, f.acme.key, r.body)
		if c, _ := errorOf(body); code != http.StatusNotFound || c != api.CodeNotFound {
			t.Errorf("acme's key on globex's %s %s: %d %v, want 404", r.method, r.path, code, body)
		}
	}
	for _, q := range []string{"Globex lobby replacement grinder", "broken", "espresso machine"} {
		_, pack := call(t, "POST", f.url+"/api/v1/search", f.acme.key, fmt.Sprintf(`{"query":%q,"expand":3}`, q))
		delete(pack, "query") // the query itself is echoed
		if s := fmt.Sprint(pack); strings.Contains(s, "Globex") || strings.Contains(s, "globex") {
			t.Fatalf("acme's search for %q returned globex's data: %s", q, s)
		}
	}
	for _, p := range []string{"/api/v1/documents", "/api/v1/tasks", "/api/v1/nodes?type=email"} {
		_, list := call(t, "GET", f.url+p, f.acme.key, "")
		if s := fmt.Sprint(list); strings.Contains(s, "globex") || len(list["items"].([]any)) != 1 {
			t.Fatalf("acme's %s: %s", p, s)
		}
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	admin := []struct{ method, path, body string }{{"GET", "/admin/v1/stats", ""}, {"GET", "/admin/v1/clients", ""}, {"POST", "/admin/v1/clients", `{"id":"initech"}`},
		{"POST", "/admin/v1/clients/acme/merges", `{"a":"person:ann","b":"person:bob","why":"x"}`},
		{"POST", "/admin/v1/clients/acme/splits", `{"a":"person:ann","b":"person:bob","why":"x"}`},
		// The web console's admin calls.
		{"POST", "/admin/v1/reprocess", `{"client":"acme","dryRun":true}`}, {"GET", "/admin/v1/jobs", ""}, {"GET", "/admin/v1/jobs/job_x", ""},
		{"GET", "/admin/v1/clients/acme/keys", ""}, {"POST", "/admin/v1/clients/acme/keys", `{"name":"x"}`}, {"POST", "/admin/v1/keys/key_x/revoke", ""},
		{"GET", "/admin/v1/clients/acme/link-patterns", ""}, {"POST", "/admin/v1/clients/acme/link-patterns", `{"kind":"block","pattern":"x.test"}`},
		{"DELETE", "/admin/v1/clients/acme/link-patterns", `{"kind":"block","pattern":"x.test"}`}}
	stream := []struct{ method, path, body string }{{"GET", "/api/v1/events", ""}, {"POST", "/api/v1/ingest", `{"name":"a.md","content":"x"}`}}
	for _, r := range append(append(clientRoutes(f.acme), admin...), stream...) {
		for _, key := range []string{"", "jvk_not-a-key", "Basic dXNlcjpwdw=="} {
			code, body := call(t, r.method, f.url+r.path, key, r.body)
			if c, _ := errorOf(body); code != http.StatusUnauthorized || c != api.CodeUnauthenticated {
				t.Errorf("%s %s with key %q: %d %v, want 401", r.method, r.path, key, code, body)
			}
		}
	}
	for _, r := range append(clientRoutes(f.acme), stream...) {
		if code, body := call(t, r.method, f.url+r.path, f.admin, r.body); code != http.StatusForbidden {
			t.Errorf("admin key on %s: %d %v, want 403", r.path, code, body)
		}
	}
	for _, r := range admin {
		if code, body := call(t, r.method, f.url+r.path, f.acme.key, r.body); code != http.StatusForbidden {
			t.Errorf("client key on %s: %d %v, want 403", r.path, code, body)
		}
	}
}

func TestValidationErrorsNameTheField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/api/v1/search", `{"query":""}`, "query"},
		{"POST", "/api/v1/search", `{"query":"x","alpha":2}`, "alpha"},
		{"POST", "/api/v1/search", `{"query":"x","fusion":"sum"}`, "fusion"},
		{"POST", "/api/v1/search", `{"query":"x","limit":"ten"}`, "limit"},
		{"POST", "/api/v1/search", `{"query":"x","colour":"red"}`, "colour"},
		{"POST", "/api/v1/search", `{"query":`, "body"},
		{"POST", "/api/v1/search", `{"query":"x"} {"query":"y"}`, "body"},
		{"GET", "/api/v1/search?query=x&expand=9", "", "expand"},
		{"GET", "/api/v1/search?query=x&alpha=high", "", "alpha"},
		{"GET", "/api/v1/search?query=x&group=document", "", "group"},
		{"GET", "/api/v1/search?query=x&feedback=maybe", "", "feedback"},
		{"POST", "/api/v1/search", `{"query":"x","feedback":"no"}`, "feedback"},
		{"GET", "/api/v1/search?query=x&titles=maybe", "", "titles"},
		{"POST", "/api/v1/search", `{"query":"x","titles":"no"}`, "titles"},
		{"GET", "/api/v1/nodes/" + url.PathEscape(f.acme.node) + "/neighbors?depth=many", "", "depth"},
		{"GET", "/api/v1/paths?to=person:ann", "", "from"},
		{"GET", "/api/v1/paths?from=person:ann&to=person:bob&maxDepth=50", "", "maxDepth"},
		{"GET", "/api/v1/documents?state=LOST", "", "state"},
		{"GET", "/api/v1/documents?limit=0", "", "limit"},
		{"GET", "/api/v1/documents?cursor=bm90LWEtY3Vyc29y", "", "cursor"},
		{"GET", "/api/v1/nodes?limit=5000", "", "limit"},
		{"GET", "/api/v1/nodes?cursor=%25%25", "", "cursor"},
		{"GET", "/api/v1/tasks?state=SLEEPING", "", "state"},
		{"GET", "/api/v1/tasks?kind=CHORE", "", "kind"},
		{"POST", "/admin/v1/clients", `{"id":"Not A Client!"}`, "id"},
		{"POST", "/admin/v1/clients/acme/link-patterns", `{"kind":"maybe","pattern":"x.test"}`, "kind"},
	} {
		key := f.acme.key
		if strings.HasPrefix(tc.path, "/admin/") {
			key = f.admin
		}
		code, body := call(t, tc.method, f.url+tc.path, key, tc.body)
		if c, field := errorOf(body); code != http.StatusBadRequest || c != api.CodeInvalid || field != tc.field {
			t.Errorf("%s %s %s: %d %v, want 400 naming %s", tc.method, tc.path, tc.body, code, body, tc.field)
		}
	}
	// Not found on an existing client's unknown IDs, and unknown routes, in the one error shape.
	for _, p := range []string{"/api/v1/nodes/person:nobody", "/api/v1/chunks/nope", "/api/v1/documents/nope", "/api/v1/tasks/nope", "/api/v1/nothing-here"} {
		if code, body := call(t, "GET", f.url+p, f.acme.key, ""); code != http.StatusNotFound || body["error"] == nil {
			t.Errorf("%s: %d %v, want a JSON 404", p, code, body)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *api.Config) { c.MaxBodyBytes = 1 << 10; c.RateLimit, c.RateBurst = 1, 5 })
	big := `{"query":"` + strings.Repeat("x", 4<<10) + `"}`
	if code, body := call(t, "POST", f.url+"/api/v1/search", f.acme.key, big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("large body: %d %v", code, body)
	}
	limited := 0
	for range 10 {
		if code, _ := call(t, "GET", f.url+"/api/v1/documents", f.acme.key, ""); code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 4 {
		t.Fatalf("%d of 10 quick requests limited, want at least 4 with a burst of 5 (the first spent one)", limited)
	}
	// The limit is per key: globex is not slowed down by acme.
	if code, _ := call(t, "GET", f.url+"/api/v1/documents", f.globex.key, ""); code != http.StatusOK {
		t.Fatalf("globex limited by acme's requests: %d", code)
	}
}

func TestListsPageWithCursors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for i := range 6 {
		body := fmt.Sprint("Note ", i)
		d, _, err := f.st.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceFile, ExternalID: fmt.Sprint("n", i), Raw: []byte(body),
			Normalized: store.Normalized{Title: body, Body: body}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.EnqueueTasks(t.Context(), store.Task{Kind: store.KindData, Client: "acme", SourceDoc: d.ID, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		route        string
		items, pages int
		id           string
	}{
		{"/api/v1/documents?limit=2", 7, 4, "id"}, // 2+2+2+1
		{"/api/v1/tasks?limit=2&state=NEW", 7, 4, "id"},
		{"/api/v1/nodes?limit=1", 2, 3, "key"}, // the email and Ann; a full last page means one more, empty
	} {
		route := tc.route
		seen := map[string]bool{}
		next, pages := route, 0
		for next != "" {
			code, body := call(t, "GET", f.url+next, f.acme.key, "")
			if code != http.StatusOK {
				t.Fatalf("%s: %d %v", next, code, body)
			}
			for _, it := range body["items"].([]any) {
				id := it.(map[string]any)[tc.id].(string)
				if seen[id] {
					t.Fatalf("%s: %s listed twice", route, id)
				}
				seen[id] = true
			}
			next = ""
			if c, ok := body["nextCursor"].(string); ok {
				next = route + "&cursor=" + c
			}
			if pages++; pages > 10 {
				t.Fatal("paging does not end")
			}
		}
		if len(seen) != tc.items || pages != tc.pages {
			t.Fatalf("%s: %d items in %d pages", route, len(seen), pages)
		}
	}
}
