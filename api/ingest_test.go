package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
)

const pushedEmail = "From: Ann Novak <ann@acme.test>\r\nTo: Bob <bob@acme.test>\r\nSubject: Grinder calibration\r\n" +
	"Message-ID: <pushed-1@acme.test>\r\nDate: Sat, 21 Nov 2026 10:00:00 +0000\r\n\r\nPlease calibrate the burr grinder to 250 microns by Monday.\r\n"

func TestIngestPushesADocumentThroughThePipeline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ingest := func(body string) (int, map[string]any) {
		return call(t, "POST", f.url+"/api/v1/ingest", f.acme.key, body)
	}

	req, _ := json.Marshal(map[string]any{"name": "grinder.eml", "content": pushedEmail})
	code, body := ingest(string(req))
	items, _ := body["items"].([]any)
	if code != http.StatusAccepted || len(items) != 1 {
		t.Fatalf("ingest: %d %v", code, body)
	}
	doc := items[0].(map[string]any)
	if doc["externalId"] != "pushed-1@acme.test" || doc["created"] != true || doc["state"] != "NEW" || doc["sourceType"] != "EMAIL" {
		t.Fatalf("ingested %v", doc)
	}
	// The same bytes again (as base64 this time) store nothing new.
	req, _ = json.Marshal(map[string]any{"name": "grinder.eml", "contentBase64": base64.StdEncoding.EncodeToString([]byte(pushedEmail))})
	if _, again := ingest(string(req)); again["items"].([]any)[0].(map[string]any)["created"] != false {
		t.Fatalf("second ingest created a version: %v", again)
	}
	// A broken Jira payload is stored, and says why it will be quarantined.
	code, broken := ingest(`{"name":"issues.json","content":"{\"issues\": [{\"key\": 42"}`)
	bad := broken["items"].([]any)[0].(map[string]any)
	if code != http.StatusAccepted || bad["unparsable"] == "" || bad["unparsable"] == nil {
		t.Fatalf("broken payload: %d %v", code, broken)
	}
	// An empty file is stored too, to be quarantined with its reason.
	code, empty := ingest(`{"name":"a.md","content":""}`)
	if e := empty["items"].([]any)[0].(map[string]any); code != http.StatusAccepted || e["unparsable"] != "empty file (0 bytes)" {
		t.Fatalf("empty file: %d %v", code, empty)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"name":"tool.exe","content":"MZ"}`, "name"},
		{`{"name":"../etc/passwd.md","content":"x"}`, "name"},
		{`{"name":"a.md","content":"x","contentBase64":"eA=="}`, "content"},
		{`{"name":"a.md","contentBase64":"%%%"}`, "contentBase64"},
	} {
		if code, body := ingest(tc.body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.body, code, body, tc.field)
		} else if _, field := errorOf(body); field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.body, field, tc.field)
		}
	}
	// The indexers take pushed documents like polled ones.
	ix, _ := indexers.New(f.st, indexers.Config{PollInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ix.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, d := call(t, "GET", f.url+"/api/v1/documents/"+doc["id"].(string), f.acme.key, "")
		_, q := call(t, "GET", f.url+"/api/v1/documents/"+bad["id"].(string), f.acme.key, "")
		if d["state"] == string(store.DocIndexed) && q["state"] == string(store.DocQuarantined) {
			if q["error"] == nil {
				t.Fatalf("quarantined without a reason: %v", q)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushed documents not processed: %v / %v", d["state"], q["state"])
		}
	}
}
