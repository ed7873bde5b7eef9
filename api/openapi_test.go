package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/jervis-dev/jervis/api"
)

// openAPI loads the document and compiles schemas out of it by JSON pointer.
type openAPI struct {
	doc map[string]any
	c   *jsonschema.Compiler
}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", doc["openapi"])
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("openapi.yaml is not JSON-shaped: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", inst); err != nil {
		t.Fatal(err)
	}
	return openAPI{doc: doc, c: c}
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// at returns the value at a JSON pointer and its real pointer, following
// every $ref it meets on the way.
func (o openAPI) at(ptr string) (any, string) {
	var v any = o.doc
	cur := ""
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		v, cur = o.deref(v, cur)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ""
		}
		v, cur = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(part)], cur+"/"+part
	}
	return o.deref(v, cur)
}

func (o openAPI) deref(v any, cur string) (any, string) {
	for {
		m, ok := v.(map[string]any)
		ref, isRef := m["$ref"].(string)
		if !ok || !isRef {
			return v, cur
		}
		v, cur = o.doc, strings.TrimPrefix(ref, "#")
		for _, part := range strings.Split(strings.TrimPrefix(cur, "/"), "/") {
			mm, _ := v.(map[string]any)
			v = mm[strings.NewReplacer("~1", "/", "~0", "~").Replace(part)]
		}
	}
}

func (o openAPI) validate(t *testing.T, schemaPtr string, instance []byte) error {
	t.Helper()
	sch, err := o.c.Compile("openapi.json#" + schemaPtr)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPtr, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

func TestOpenAPIDocumentsEveryRouteAndOnlyThem(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	f := newFixture(t, func(c *api.Config) { c.Metrics = http.NotFoundHandler() })
	registered := append(slices.Clone(api.HealthPatterns), f.patterns...)
	var documented []string
	for path, item := range o.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if slices.Contains([]string{"get", "post", "put", "patch", "delete"}, method) {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(registered)
	sort.Strings(documented)
	if !slices.Equal(registered, documented) {
		t.Fatalf("routes and document differ:\nundocumented: %v\nnot served: %v", diff(registered, documented), diff(documented, registered))
	}
	code, body := get(t, f.url+"/openapi.yaml")
	if code != http.StatusOK || !bytes.Equal(body, api.OpenAPI) {
		t.Fatalf("GET /openapi.yaml: %d", code)
	}
}

// TestOpenAPIExamplesValidate checks every example in the document against
// the schema beside it.
func TestOpenAPIExamplesValidate(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	n := 0
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch v := v.(type) {
		case map[string]any:
			if ex, ok := v["example"]; ok && v["schema"] != nil {
				b, _ := json.Marshal(ex)
				if err := o.validate(t, ptr+"/schema", b); err != nil {
					t.Errorf("example at %s does not validate: %v", ptr, err)
				}
				n++
			}
			for k, x := range v {
				walk(x, ptr+"/"+escape(k))
			}
		case []any:
			for i, x := range v {
				walk(x, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(o.doc, "")
	if n < 15 {
		t.Fatalf("only %d examples checked", n)
	}
}

// TestOpenAPIMatchesRealResponses validates what the handlers really answer
// against the documented response schemas.
func TestOpenAPIMatchesRealResponses(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	f := newFixture(t, nil)
	esc := url.PathEscape
	for _, tc := range []struct {
		method, path, template, key, body string
		status                            int
	}{
		{"POST", "/api/v1/search", "/api/v1/search", f.acme.key, `{"query":"espresso machine","expand":2}`, 200},
		{"GET", "/api/v1/search?query=espresso", "/api/v1/search", f.acme.key, "", 200},
		{"GET", "/api/v1/search?query=x&alpha=9", "/api/v1/search", f.acme.key, "", 400},
		{"GET", "/api/v1/nodes?limit=1", "/api/v1/nodes", f.acme.key, "", 200},
		{"GET", "/api/v1/nodes/" + esc(f.acme.node), "/api/v1/nodes/{key}", f.acme.key, "", 200},
		{"GET", "/api/v1/nodes/" + esc(f.globex.node), "/api/v1/nodes/{key}", f.acme.key, "", 404},
		{"GET", "/api/v1/nodes/" + esc(f.acme.node) + "/neighbors?depth=2", "/api/v1/nodes/{key}/neighbors", f.acme.key, "", 200},
		{"GET", "/api/v1/paths?from=person:ann&to=" + url.QueryEscape(f.acme.node), "/api/v1/paths", f.acme.key, "", 200},
		{"GET", "/api/v1/nodes/person:ann/aliases", "/api/v1/nodes/{key}/aliases", f.acme.key, "", 200},
		{"GET", "/api/v1/nodes/person:nobody/aliases", "/api/v1/nodes/{key}/aliases", f.acme.key, "", 404},
		{"POST", "/admin/v1/clients/acme/merges", "/admin/v1/clients/{client}/merges", f.admin, `{"a":"person:ann","b":"person:ann@acme.test","why":"one Ann"}`, 200},
		{"POST", "/admin/v1/clients/acme/merges", "/admin/v1/clients/{client}/merges", f.admin, `{"a":"person:ann","b":"person:ann@acme.test"}`, 400},
		{"POST", "/admin/v1/clients/nobody/merges", "/admin/v1/clients/{client}/merges", f.admin, `{"a":"person:a","b":"person:b","why":"x"}`, 404},
		{"POST", "/admin/v1/clients/acme/splits", "/admin/v1/clients/{client}/splits", f.admin, `{"a":"person:ann","b":"person:ann@acme.test","why":"two Anns"}`, 200},
		{"GET", "/api/v1/edges/" + esc(f.acme.edge), "/api/v1/edges/{key}", f.acme.key, "", 200},
		{"GET", "/api/v1/chunks/" + f.acme.chunk, "/api/v1/chunks/{id}", f.acme.key, "", 200},
		{"GET", "/api/v1/documents?limit=1", "/api/v1/documents", f.acme.key, "", 200},
		{"GET", "/api/v1/documents?degraded=true", "/api/v1/documents", f.acme.key, "", 200},
		{"GET", "/api/v1/documents?degraded=maybe", "/api/v1/documents", f.acme.key, "", 400},
		{"GET", "/api/v1/documents?sourceUrn=EMAIL:m1@acme.test", "/api/v1/documents", f.acme.key, "", 200},
		{"GET", "/api/v1/documents?sourceUrn=nothing", "/api/v1/documents", f.acme.key, "", 400},
		{"GET", "/api/v1/documents/" + f.acme.doc, "/api/v1/documents/{id}", f.acme.key, "", 200},
		{"POST", "/api/v1/ingest", "/api/v1/ingest", f.acme.key, `{"name":"n.md","content":"# N\n\nA note."}`, 202},
		{"GET", "/api/v1/tasks?limit=5", "/api/v1/tasks", f.acme.key, "", 200},
		{"GET", "/api/v1/tasks/" + f.acme.task, "/api/v1/tasks/{id}", f.acme.key, "", 200},
		{"GET", "/api/v1/tasks", "/api/v1/tasks", "", "", 401},
		{"GET", "/admin/v1/stats", "/admin/v1/stats", f.admin, "", 200},
		{"GET", "/admin/v1/stats", "/admin/v1/stats", f.acme.key, "", 403},
		{"GET", "/admin/v1/clients", "/admin/v1/clients", f.admin, "", 200},
		{"POST", "/admin/v1/clients", "/admin/v1/clients", f.admin, `{"id":"initech"}`, 201},
		{"POST", "/admin/v1/clients", "/admin/v1/clients", f.admin, `{"id":"initech"}`, 409},
		{"POST", "/admin/v1/clients", "/admin/v1/clients", f.admin, `{"id":"umbrella","namespaces":["Bad One"]}`, 400},
		{"PUT", "/admin/v1/clients/initech/namespaces", "/admin/v1/clients/{client}/namespaces", f.admin, `{"namespaces":["order","customer"]}`, 200},
		{"PUT", "/admin/v1/clients/initech/namespaces", "/admin/v1/clients/{client}/namespaces", f.admin, `{"namespaces":["x"]}`, 400},
		{"PUT", "/admin/v1/clients/nobody/namespaces", "/admin/v1/clients/{client}/namespaces", f.admin, `{"namespaces":["order"]}`, 404},
		{"POST", "/admin/v1/clients/initech/keys", "/admin/v1/clients/{client}/keys", f.admin, `{"name":"ui"}`, 201},
		{"GET", "/admin/v1/clients/initech/keys", "/admin/v1/clients/{client}/keys", f.admin, "", 200},
		{"POST", "/admin/v1/clients/acme/link-patterns", "/admin/v1/clients/{client}/link-patterns", f.admin, `{"kind":"block","pattern":"ads.test"}`, 201},
		{"GET", "/admin/v1/clients/acme/link-patterns", "/admin/v1/clients/{client}/link-patterns", f.admin, "", 200},
		{"POST", "/admin/v1/tasks/" + f.acme.task + "/cancel", "/admin/v1/tasks/{id}/cancel", f.admin, `{"client":"acme"}`, 200},
		{"POST", "/admin/v1/tasks/" + f.acme.task + "/retry", "/admin/v1/tasks/{id}/retry", f.admin, `{"client":"acme"}`, 200},
		{"POST", "/admin/v1/reprocess", "/admin/v1/reprocess", f.admin, `{"client":"acme","dryRun":true}`, 202},
		{"POST", "/admin/v1/clients/acme/encoder", "/admin/v1/clients/{client}/encoder", f.admin, `{"replay":false}`, 202},
		{"POST", "/admin/v1/clients/acme/encoder", "/admin/v1/clients/{client}/encoder", f.admin, `{"replay":"yes"}`, 400},
		{"POST", "/admin/v1/clients/nobody/encoder", "/admin/v1/clients/{client}/encoder", f.admin, "", 404},
		{"GET", "/admin/v1/jobs", "/admin/v1/jobs", f.admin, "", 200},
		{"GET", "/admin/v1/connections", "/admin/v1/connections", f.admin, "", 200},
		{"GET", "/admin/v1/connections", "/admin/v1/connections", f.acme.key, "", 403},
		{"POST", "/admin/v1/connections/mail/poll", "/admin/v1/connections/{id}/poll", f.admin, "", 409},
	} {
		req, _ := http.NewRequest(tc.method, f.url+tc.path, strings.NewReader(tc.body))
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, resp.StatusCode, body, tc.status)
			continue
		}
		respPtr := "/paths/" + escape(tc.template) + "/" + strings.ToLower(tc.method) + "/responses/" + strconv.Itoa(tc.status)
		if r, _ := o.at(respPtr); r == nil {
			t.Errorf("%s %s: status %d is not documented", tc.method, tc.template, tc.status)
			continue
		}
		_, schemaPtr := o.at(respPtr + "/content/application~1json/schema")
		if err := o.validate(t, schemaPtr, body); err != nil {
			t.Errorf("%s %s (%d): the answer does not match %s: %v\n%s", tc.method, tc.path, tc.status, schemaPtr, err, body)
		}
	}
}

func get(t *testing.T, u string) (int, []byte) {
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
