package filedrop_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// registry reads files as jervis does: each kind claims its extensions.
var registry = kinds.Default()

func parseFile(t *testing.T, name string) []store.Document {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := registry.Parse(name, raw)
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
		docs, err := registry.Parse(name, bin)
		if err != nil || len(docs) != 1 || !strings.Contains(reason(docs[0]), want) || len(docs[0].Raw) != len(bin) {
			t.Errorf("%s: %v %+v", name, err, docs)
		}
	}
	if _, err := registry.Parse("image.png", bin); !errors.Is(err, pollers.ErrUnsupported) {
		t.Fatalf("png: %v", err)
	}
	// Empty files of every type, and files that could not be read, are
	// documents with the reason, named by the file.
	for _, name := range []string{"a.eml", "b.mbox", "c.json", "d.md", "e.html"} {
		docs, err := registry.Parse(name, []byte("\n "))
		if err != nil || len(docs) != 1 || docs[0].ExternalID != name || reason(docs[0]) != "empty file (2 bytes)" {
			t.Errorf("empty %s: %v %+v", name, err, docs)
		}
	}
	u := registry.Unreadable("x/y.eml", errors.New("permission denied"))
	if u.ExternalID != "x/y.eml" || u.SourceType != store.SourceEmail || reason(u) != "unreadable: permission denied" || u.ContentHash == "" {
		t.Fatalf("unreadable: %+v", u)
	}
}

// Walk reads a directory, a tar archive's members and a gzipped file's
// content; a broken archive is visited with its error.
func TestWalk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub", ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "note.md"), []byte("# Note"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", ".git", "config"), []byte("x"), 0o644)
	var tgz, gz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{"p/a.json": "{}", "p/._a.json": "mac junk"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	os.WriteFile(filepath.Join(dir, "issues.tar.gz"), tgz.Bytes(), 0o644)
	zw = gzip.NewWriter(&gz)
	zw.Write([]byte("From x\n"))
	zw.Close()
	os.WriteFile(filepath.Join(dir, "list.mbox.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "cut.tgz"), tgz.Bytes()[:30], 0o644)
	// A gzipped mailbox that breaks off: read to its break, then the error
	// (not the clean end of a shorter mailbox).
	var long bytes.Buffer
	zw = gzip.NewWriter(&long)
	for i := range 20000 {
		fmt.Fprintf(zw, "From x\nSubject: %d\n\nbody %d\n\n", i, i*7919)
	}
	zw.Close()
	os.WriteFile(filepath.Join(dir, "cut.mbox.gz"), long.Bytes()[:long.Len()/2], 0o644)
	got := map[string]string{}
	err := filedrop.Walk(dir, func(name string, r io.Reader, err error) error {
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(r)
		}
		got[filepath.ToSlash(name)] = string(raw)
		if len(raw) > 64 {
			got[filepath.ToSlash(name)] = fmt.Sprintf("%d bytes", len(raw))
		}
		if err != nil {
			got[filepath.ToSlash(name)] = "error"
		}
		return nil
	})
	want := map[string]string{"sub/note.md": "# Note", "p/a.json": "{}", "list.mbox": "From x\n", "cut.tgz": "error", "cut.mbox": "error"}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("walk: %v %q, want %q", err, got, want)
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
	src, err := filedrop.New(dir, 2, registry)
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
	// An empty file dropped in is stored, to be quarantined with its reason,
	// not dropped.
	write("empty.eml", "", time.Now().Add(time.Second))
	b, _ = src.Poll(context.Background(), b.Cursor)
	if len(b.Documents) != 1 || b.Documents[0].ExternalID != "empty.eml" || reason(b.Documents[0]) != "empty file (0 bytes)" {
		t.Fatalf("empty file: %+v", b.Documents)
	}
	if _, err := filedrop.New(filepath.Join(dir, "missing"), 0, registry); err == nil {
		t.Fatal("missing dir accepted")
	}
}

// A mailbox is split as it is read: one larger than MaxFileBytes is all its
// messages (not one quarantined blob), a line longer than the read buffer
// stays one line, CRLF line ends and ">From " escapes are undone, and a
// mailbox that breaks off keeps the messages before the break.
func TestMailboxIsStreamed(t *testing.T) {
	t.Parallel()
	att := strings.Repeat(strings.Repeat("QUJD", 19)+"\r\n", 10<<20/78) // 10 MiB of base64
	var parts []io.Reader
	for i := range 7 {
		parts = append(parts, strings.NewReader(fmt.Sprintf("From x Mon Jan  1 00:00:00 2024\r\nFrom: a@acme.test\r\nMessage-ID: <big-%d@acme.test>\r\n"+
			"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n>From the log, part %d.\r\n%s\r\n--b\r\n"+
			"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n%s--b--\r\n\r\n", i, i, strings.Repeat("y", 100<<10), att)))
	}
	var docs []store.Document
	err := registry.ParseFile("list.mbox", io.MultiReader(parts...), func(d store.Document) error { docs = append(docs, d); return nil })
	if err != nil || len(docs) != 7 {
		t.Fatalf("%d documents, %v", len(docs), err)
	}
	for i, d := range docs {
		if d.ExternalID != fmt.Sprintf("big-%d@acme.test", i) || reason(d) != "" || !strings.HasPrefix(d.Normalized.Body, fmt.Sprintf("From the log, part %d.\n", i)) ||
			!strings.Contains(d.Normalized.Body, strings.Repeat("y", 100<<10)) {
			t.Fatalf("message %d: %s %q %.80q", i, d.ExternalID, reason(d), d.Normalized.Body)
		}
	}
	// The same bytes through Parse split the same way.
	raw, _ := os.ReadFile("testdata/thread.mbox")
	whole, _ := registry.Parse("thread.mbox", raw)
	var streamed []store.Document
	registry.ParseFile("thread.mbox", strings.NewReader(string(raw)), func(d store.Document) error { streamed = append(streamed, d); return nil })
	if len(whole) != 2 || len(streamed) != 2 || whole[0].ContentHash != streamed[0].ContentHash || string(whole[1].Raw) != string(streamed[1].Raw) {
		t.Fatalf("Parse and ParseFrom differ: %d %d", len(whole), len(streamed))
	}
	// A list archive written as .txt (Mailman's 2022-August.txt) is a
	// mailbox; a note that starts with "From " in prose is not.
	archive, _ := registry.Parse("2022-August.txt", raw)
	var fromReader []store.Document
	registry.ParseFile("2022-August.txt", strings.NewReader(string(raw)), func(d store.Document) error { fromReader = append(fromReader, d); return nil })
	note, _ := registry.Parse("note.txt", []byte("From the desk of Ann: lunch is at noon.\n"))
	if len(archive) != 2 || archive[0].SourceType != store.SourceEmail || len(fromReader) != 2 || len(note) != 1 || note[0].SourceType != store.SourceFile {
		t.Fatalf("archive %d, from a reader %d, note %+v", len(archive), len(fromReader), note)
	}
	// A mailbox that breaks off: the messages before the break, and the error.
	docs = nil
	err = registry.ParseFile("cut.mbox", io.MultiReader(strings.NewReader(string(raw)), iotestErr{}), func(d store.Document) error { docs = append(docs, d); return nil })
	if len(docs) != 2 || err == nil || !strings.Contains(err.Error(), "after 2 messages") {
		t.Fatalf("broken off: %d documents, %v", len(docs), err)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("disk read error") }

// Files read one after another share read buffers: each document keeps
// its own file's bytes, whatever size the files before it were (larger,
// smaller, past the buffer), and however its kinds read it (declined by
// one and kept whole with the reason, or parsed).
func TestFilesReadOneAfterAnotherKeepTheirBytes(t *testing.T) {
	t.Parallel()
	for i, size := range []int{200 << 10, 10, 64 << 10, 64<<10 + 1, 3, 70 << 10, 4096, 1} {
		content := make([]byte, size)
		for j := range content {
			content[j] = byte('a' + (i+j)%26)
		}
		var docs []store.Document
		err := registry.ParseFile(fmt.Sprintf("f%d.json", i), strings.NewReader(string(content)), func(d store.Document) error { docs = append(docs, d); return nil })
		if err != nil || len(docs) != 1 || string(docs[0].Raw) != string(content) || !strings.Contains(reason(docs[0]), "neither Jira issues nor Confluence pages") {
			t.Fatalf("file %d (%d bytes): %v, %d documents", i, size, err, len(docs))
		}
	}
	for range 3 {
		docs := parseFile(t, "jira-search.json")
		if len(docs) != 2 || docs[0].ExternalID != "OPS-12" || reason(docs[0]) != "" {
			t.Fatalf("jira after the others: %+v", docs)
		}
	}
}
