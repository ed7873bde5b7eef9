package jira_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/jira"
)

func load(t *testing.T, name string) []store.Document {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := jira.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestParseDataCenterSearch(t *testing.T) {
	t.Parallel()
	docs := load(t, "search_v2.json")
	if len(docs) != 2 {
		t.Fatalf("%d docs", len(docs))
	}
	d := docs[0]
	m := d.Normalized.Metadata
	if d.ExternalID != "OPS-12" || d.SourceType != store.SourceJira || d.Normalized.Title != "OPS-12: Rotate TLS certificates on the API gateway" ||
		m["assignee"] != "bob.smith@acme.test" || m["reporter"] != "ann.novak@acme.test" || m["status"] != "In Progress" || m["project"] != "OPS" {
		t.Fatalf("issue: %+v", d.Normalized)
	}
	links := m["issueLinks"].([]jira.Link)
	if len(links) != 2 || links[0] != (jira.Link{Type: "Blocks", Direction: "outward", Phrase: "blocks", Key: "OPS-15"}) ||
		links[1] != (jira.Link{Type: "Duplicate", Direction: "inward", Phrase: "is duplicated by", Key: "OPS-9"}) {
		t.Fatalf("links %+v", links)
	}
	if !strings.Contains(d.Normalized.Body, "renewal job failed") || !strings.Contains(d.Normalized.Body, "Comment by ann.novak@acme.test") ||
		d.ObservedAt.IsZero() || m["fixVersions"].([]string)[0] != "2.3" {
		t.Fatalf("body %q observed %v", d.Normalized.Body, d.ObservedAt)
	}
	if docs[1].Normalized.Metadata["assignee"] != nil || docs[1].Normalized.Metadata["reporter"] != "anovak" {
		t.Fatalf("second issue: %+v", docs[1].Normalized.Metadata)
	}
}

func TestParseCloudIssueWithADF(t *testing.T) {
	t.Parallel()
	docs := load(t, "issue_v3.json")
	if len(docs) != 1 {
		t.Fatal(len(docs))
	}
	body := docs[0].Normalized.Body
	for _, want := range []string{"Photos larger than 12 MP freeze the cropper. @Carol D.", "iPhone 15, iOS 19", "https://support.acme.test/rec/77", "Reproduced on iPad too."} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if docs[0].Normalized.Metadata["assignee"] != "carol@acme.test" || docs[0].Normalized.Metadata["reporter"] != "712020:77aa-bbbb" {
		t.Fatalf("people: %+v", docs[0].Normalized.Metadata)
	}
}

func TestBadFieldsAreQuarantinedOneByOne(t *testing.T) {
	t.Parallel()
	docs := load(t, "bad_fields.json")
	if len(docs) != 5 {
		t.Fatalf("%d docs", len(docs))
	}
	if _, bad := docs[0].Normalized.Metadata[store.MetaParseError]; bad {
		t.Fatal("the good issue was marked bad")
	}
	for i, want := range map[int]string{1: "cannot unmarshal number", 2: "missing fields", 3: "missing key", 4: "cannot unmarshal string"} {
		reason, _ := docs[i].Normalized.Metadata[store.MetaParseError].(string)
		if !strings.Contains(reason, want) || len(docs[i].Raw) == 0 || docs[i].ExternalID == "" {
			t.Errorf("item %d: reason %q, want %q (id %q)", i+1, reason, want, docs[i].ExternalID)
		}
	}
	for _, junk := range []string{"", "null", "42", `{"foo":1}`, "[1,2", "<xml/>"} {
		if _, err := jira.Parse([]byte(junk)); !errors.Is(err, jira.ErrNotJira) {
			t.Errorf("%q: err = %v", junk, err)
		}
	}
}
