package importer_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

func open(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "jervis.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Documents are written on a goroutine of their own while the walk parses
// the next files, in the order parsed: a file met twice in an archive is
// stored as two versions, the later content the later version, and every
// document is counted.
func TestImportStoresInTheOrderParsed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := open(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct{ name, body string }{{"a.md", "# A\n\nfirst"}, {"b.md", "# B\n\nbee"}, {"a.md", "# A\n\nsecond"}, {"empty.md", ""}}
	for i := range 100 {
		entries = append(entries, struct{ name, body string }{fmt.Sprintf("n%03d.md", i), fmt.Sprintf("# Note %d\n\ntext %d", i, i)})
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	archive := filepath.Join(t.TempDir(), "notes.tar")
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	im := &importer.Importer{Store: st, Kinds: kinds.Default(), Client: "acme", Connection: "import", DataDir: t.TempDir()}
	if err := im.Paths(ctx, []string{archive}); err != nil {
		t.Fatal(err)
	}
	if s := im.Summary; s.Files != len(entries) || s.Documents != len(entries) || s.NewVersions != len(entries) || s.Unparsable != 1 {
		t.Fatalf("summary %+v, want %d files and documents, one unparsable (the empty file)", s, len(entries))
	}
	var versions []store.Document
	for after := (*store.Position)(nil); ; {
		docs, err := st.ListDocuments(ctx, store.DocumentQuery{Client: "acme", Limit: 500, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if strings.HasSuffix(d.ExternalID, "a.md") {
				versions = append(versions, d)
			}
		}
		if len(docs) < 500 {
			break
		}
		last := docs[len(docs)-1]
		after = &store.Position{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	if len(versions) != 2 {
		t.Fatalf("%d documents of a.md, want 2 versions", len(versions))
	}
	for _, d := range versions {
		if want := map[int]string{1: "first", 2: "second"}[d.Version]; !strings.Contains(d.Normalized.Body, want) {
			t.Errorf("a.md version %d: %q, want %q", d.Version, d.Normalized.Body, want)
		}
	}
}

// A failure of the store stops the walk at its next document and is what
// the import returns, a StoreError: here the database is closed while the
// third of 300 files is read.
func TestImportStopsAtAFailureOfTheStore(t *testing.T) {
	t.Parallel()
	st := open(t)
	dir := t.TempDir()
	const files = 300
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%03d.md", i)), fmt.Appendf(nil, "# Note %d\n\ntext", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	im := &importer.Importer{Store: st, Kinds: kinds.Default(), Client: "acme", Connection: "import", DataDir: t.TempDir(),
		Transform: func(name string, r io.Reader) io.Reader {
			if seen++; seen == 3 {
				st.Close()
			}
			return r
		}}
	// A repository after it is read ahead meanwhile: it stops too.
	err := im.Paths(t.Context(), []string{dir, gitRepo(t, 70)})
	var se *pollers.StoreError
	if !errors.As(err, &se) {
		t.Fatalf("import: %v, want a StoreError", err)
	}
	// At most the writer's batch in hand when the write failed (up to 64:
	// the writer takes what waits, and a writer scheduled late — other
	// work on the CPUs, here the repository read ahead — finds more
	// waiting), the queue behind it (64) and the documents in hand were
	// read after the failure.
	if im.Summary.Files >= files || im.Summary.Files > 3+2*64+2 {
		t.Fatalf("%d of %d files read after the store failed at the third", im.Summary.Files, files)
	}
	if im.Summary.Documents > 2 {
		t.Fatalf("%d documents counted as stored; the store was closed at the third file", im.Summary.Documents)
	}
}

// gitRepo is a repository of n commits, a file changed by each.
func gitRepo(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	r, err := gogit.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Worktree()
	for i := range n {
		name := fmt.Sprintf("f%d.txt", i%7)
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "line %d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
		w.Add(name)
		sig := &object.Signature{Name: "Ann Novak", Email: "ann@acme.test", When: time.Date(2026, 3, 1, 9, i, 0, 0, time.UTC)}
		if _, err := w.Commit(fmt.Sprintf("Change %d", i), &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// stored is what the store was given, in the order it stored it (its
// document.stored events): source type and external ID.
func stored(t *testing.T, st *sqlite.Store) []string {
	t.Helper()
	var out []string
	for after := int64(0); ; {
		evs, err := st.ListEvents(t.Context(), store.EventQuery{Client: "acme", Aggregate: "document", AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			after = e.Seq
			if e.Type != "document.stored" {
				continue
			}
			d, err := st.GetDocument(t.Context(), "acme", e.AggregateID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(d.SourceType)+" "+d.ExternalID)
		}
		if len(evs) == 0 {
			return out
		}
	}
}

// A repository after other paths is read while they are imported, and
// stored after them, its documents in the order an import of it alone
// stores them; a path named twice is imported once more, unchanged.
func TestRepositoryReadAheadStoresInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%03d.md", i)), fmt.Appendf(nil, "# Note %d\n\ntext", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := gitRepo(t, 70)

	alone := open(t)
	im := &importer.Importer{Store: alone, Kinds: kinds.Default(), Client: "acme", Connection: "import", DataDir: t.TempDir()}
	if err := im.Paths(t.Context(), []string{repo}); err != nil {
		t.Fatal(err)
	}
	want := stored(t, alone)

	st := open(t)
	im = &importer.Importer{Store: st, Kinds: kinds.Default(), Client: "acme", Connection: "import", DataDir: t.TempDir()}
	if err := im.Paths(t.Context(), []string{dir, repo, repo}); err != nil {
		t.Fatal(err)
	}
	got := stored(t, st)
	if len(want) != 71 || len(got) != 40+71 {
		t.Fatalf("stored %d alone (want 70 commits and a branch), %d after the notes", len(want), len(got))
	}
	for i, g := range got[:40] {
		if !strings.HasSuffix(g, ".md") {
			t.Fatalf("document %d is %q, want the notes first", i, g)
		}
	}
	if !slices.Equal(got[40:], want) {
		t.Fatalf("the repository after the notes:\n%q\nalone:\n%q", got[40:], want)
	}
	if s := im.Summary; s.Repositories != 2 || s.Commits != 2*71 || s.NewVersions != 40+71 {
		t.Fatalf("summary %+v: two repositories read, the second time nothing new", s)
	}
}
