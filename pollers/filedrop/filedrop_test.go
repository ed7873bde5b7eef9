package filedrop_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/filedrop"
)

func parseFile(t *testing.T, name string) []store.Document {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filedrop.Parse(name, raw)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func reason(d store.Document) string {
	r, _ := d.Normalized.Metadata[store.MetaParseError].(string)
	return r
}

func TestParseFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		n      int
		source store.SourceType
		first  string // external ID of the first document
	}{
		{"alternative.eml", 1, store.SourceEmail, "20260303081358.4711@acme.test"},
		{"thread.mbox", 2, store.SourceEmail, "mb1@acme.test"},
		{"freeze.md", 1, store.SourceFile, "freeze.md"},
		{"jira-search.json", 2, store.SourceJira, "OPS-12"},
		{"confluence-page.json", 1, store.SourceConfluence, "98310"},
	} {
		docs := parseFile(t, tc.file)
		if len(docs) != tc.n || docs[0].SourceType != tc.source || docs[0].ExternalID != tc.first || reason(docs[0]) != "" {
			t.Errorf("%s: %d docs, first %s %s (%s)", tc.file, len(docs), docs[0].SourceType, docs[0].ExternalID, reason(docs[0]))
		}
	}
	mb := parseFile(t, "thread.mbox")
	if mb[1].Normalized.Metadata["inReplyTo"] != "mb1@acme.test" || !strings.Contains(mb[0].Normalized.Body, "\nFrom the archive, escaped.") {
		t.Fatalf("mbox: %+v / %q", mb[1].Normalized.Metadata, mb[0].Normalized.Body)
	}
	if md := parseFile(t, "freeze.md")[0]; md.Normalized.Title != "Release freeze policy" {
		t.Fatalf("markdown title %q", md.Normalized.Title)
	}
}

func TestParseBadFiles(t *testing.T) {
	t.Parallel()
	if d := parseFile(t, "broken.mbox"); len(d) != 1 || !strings.Contains(reason(d[0]), "not a \"From \" separator") {
		t.Fatalf("broken mbox: %+v", d)
	}
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	for name, want := range map[string]string{"photo.eml": "not an email message", "notes.md": "not UTF-8", "data.json": "neither Jira issues nor Confluence pages"} {
		docs, err := filedrop.Parse(name, bin)
		if err != nil || len(docs) != 1 || !strings.Contains(reason(docs[0]), want) || len(docs[0].Raw) != len(bin) {
			t.Errorf("%s: %v %+v", name, err, docs)
		}
	}
	if _, err := filedrop.Parse("image.png", bin); !errors.Is(err, filedrop.ErrUnsupported) {
		t.Fatalf("png: %v", err)
	}
}

func TestSourcePagesAndPicksUpChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	write := func(name, body string, at time.Time) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, at, at)
	}
	for i, name := range []string{"a.md", "b.md", "sub/c.md", "d.md", "e.md"} {
		write(name, "# "+name+"\n\ntext", base.Add(time.Duration(i)*time.Second))
	}
	write("ignored.png", "x", base)
	write(".hidden.md", "x", base)
	src, err := filedrop.New(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		b, err := src.Poll(context.Background(), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range b.Documents {
			seen = append(seen, d.ExternalID)
		}
		cursor = b.Cursor
		if !b.More {
			break
		}
		if page > 5 {
			t.Fatal("no end")
		}
	}
	if strings.Join(seen, ",") != "a.md,b.md,sub/c.md,d.md,e.md" {
		t.Fatalf("seen %v", seen)
	}
	b, _ := src.Poll(context.Background(), cursor)
	if len(b.Documents) != 0 || b.Cursor != cursor {
		t.Fatalf("nothing changed, got %d", len(b.Documents))
	}
	write("b.md", "# b.md\n\nchanged text", time.Now())
	b, _ = src.Poll(context.Background(), cursor)
	if len(b.Documents) != 1 || b.Documents[0].ExternalID != "b.md" || !strings.Contains(b.Documents[0].Normalized.Body, "changed") {
		t.Fatalf("changed file: %+v", b.Documents)
	}
	if _, err := filedrop.New(filepath.Join(dir, "missing"), 0); err == nil {
		t.Fatal("missing dir accepted")
	}
}
