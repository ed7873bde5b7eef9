package git_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/pollers/git"
)

// TestCommitFilesChanged: a commit's files and line counts are git's
// (git diff --numstat against the first parent): edits, a rename with an
// edit, a deletion, a final newline added; binary files left out.
func TestCommitFilesChanged(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	dir, w := r.dir, r.w
	lines := func(from, to int, change map[int]string) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			if s, ok := change[i]; ok {
				if s != "" {
					b.WriteString(s + "\n")
				}
				continue
			}
			b.WriteString("line " + string(rune('a'+i)) + "\n")
		}
		return b.String()
	}
	files := map[string]string{
		"a.txt":    lines(0, 9, nil),
		"old.txt":  lines(0, 11, map[int]string{0: "the old file"}),
		"gone.txt": "one\ntwo\nthree\n",
		"nl.txt":   "x\ny",
		"bin.dat":  "PK\x00\x01\x02",
	}
	commit := func(msg string, files map[string]string, remove ...string) {
		t.Helper()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range remove {
			if _, err := w.Remove(name); err != nil {
				t.Fatal(err)
			}
		}
		sig := &object.Signature{Name: "Ann Novak", Email: "ann@acme.test", When: t0}
		if _, err := w.Commit(msg, &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			t.Fatal(err)
		}
	}
	commit("first", files)
	commit("second", map[string]string{
		"a.txt":   lines(0, 11, map[int]string{3: "line three changed", 7: ""}), // +1 -1, -1, +2
		"new.txt": lines(0, 11, map[int]string{0: "the old file", 5: "a changed line"}),
		"nl.txt":  "x\ny\n",
		"bin.dat": "PK\x00\x01\x03",
	}, "old.txt", "gone.txt")

	src, _ := git.New(git.Config{URL: dir, Dir: filepath.Join(t.TempDir(), "clone")})
	b, err := src.Poll(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string][2]int{}
	for _, d := range b.Documents {
		fs, _ := d.Normalized.Metadata["files"].([]git.File)
		got[d.Normalized.Title] = map[string][2]int{}
		for _, f := range fs {
			got[d.Normalized.Title][f.Path] = [2]int{f.Additions, f.Deletions}
		}
	}
	want := map[string]map[string][2]int{
		"first":  {"a.txt": {10, 0}, "old.txt": {12, 0}, "gone.txt": {3, 0}, "nl.txt": {2, 0}},
		"second": {"a.txt": {3, 2}, "old.txt => new.txt": {1, 1}, "gone.txt": {0, 3}, "nl.txt": {1, 1}},
	}
	for title, w := range want {
		if len(got[title]) != len(w) {
			t.Errorf("%s: files %v, want %v", title, got[title], w)
			continue
		}
		for path, counts := range w {
			if got[title][path] != counts {
				t.Errorf("%s: %s +%d -%d, want +%d -%d", title, path, got[title][path][0], got[title][path][1], counts[0], counts[1])
			}
		}
	}
	for _, d := range b.Documents {
		if d.Normalized.Title == "second" && !strings.Contains(d.Normalized.Body, "\n  old.txt => new.txt (+1 -1)") {
			t.Errorf("body: %q", d.Normalized.Body)
		}
	}
}
