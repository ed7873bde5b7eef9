package confluence_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/confluence"
)

func TestParsePage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/page.json")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := confluence.Parse(b)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
	d := docs[0]
	m := d.Normalized.Metadata
	if d.ExternalID != "98310" || d.Normalized.Title != "Deploy runbook" || m["space"] != "OPS" || m["version"] != 7 ||
		m["author"] != "ann.novak@acme.test" || m["parent"] != "Runbooks" || !slices.Equal(m["pageLinks"].([]string), []string{"Release freeze policy"}) {
		t.Fatalf("page: %+v", m)
	}
	for _, want := range []string{"# Deploy runbook", "Deploys ship every second Wednesday", "Ask person:bob before deploying jira:OPS-12.", "**error budget**"} {
		if !strings.Contains(d.Normalized.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, d.Normalized.Body)
		}
	}
	if len(d.Normalized.Links) != 1 || d.Normalized.Links[0].URL != "https://grafana.acme.test/d/deploys" || d.ObservedAt.IsZero() {
		t.Fatalf("links %+v", d.Normalized.Links)
	}
	// The same page in a list response.
	list := `{"results": [` + string(b) + `, {"id": "1", "title": "No body"}], "size": 2}`
	docs, err = confluence.Parse([]byte(list))
	if err != nil || len(docs) != 2 || docs[0].ExternalID != "98310" {
		t.Fatalf("list: %d %v", len(docs), err)
	}
	if reason, _ := docs[1].Normalized.Metadata[store.MetaParseError].(string); !strings.Contains(reason, "missing body.storage") {
		t.Fatalf("page without body: %q", reason)
	}
}

func TestStorageExportsAndInvalidXHTML(t *testing.T) {
	t.Parallel()
	good := confluence.StorageDocument("Release freeze policy", []byte(`<p>The freeze starts Monday at noon.<br/>Only <em>blocking</em> fixes merge.</p>`))
	if _, bad := good.Normalized.Metadata[store.MetaParseError]; bad || !strings.Contains(good.Normalized.Body, "*blocking*") {
		t.Fatalf("good export: %+v", good.Normalized)
	}
	bad := confluence.StorageDocument("Broken", []byte(`<p>unclosed <strong>bold</p><ac:structured-macro>`))
	if reason, _ := bad.Normalized.Metadata[store.MetaParseError].(string); !strings.Contains(reason, "not well-formed") || len(bad.Raw) == 0 {
		t.Fatalf("invalid XHTML: %+v", bad.Normalized)
	}
	for _, junk := range []string{"", "[]", `{"foo":1}`, "<p/>"} {
		if _, err := confluence.Parse([]byte(junk)); err == nil {
			t.Errorf("%q parsed", junk)
		}
	}
}
