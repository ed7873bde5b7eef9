package git_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/git"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type repo struct {
	t   *testing.T
	dir string
	r   *gogit.Repository
	w   *gogit.Worktree
}

func newRepo(t *testing.T) *repo {
	dir := t.TempDir()
	r, err := gogit.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Worktree()
	return &repo{t, dir, r, w}
}

// commit writes file and commits it at minute m after t0, with extra parents.
func (r *repo) commit(file, msg string, m int, parents ...plumbing.Hash) plumbing.Hash {
	r.t.Helper()
	os.WriteFile(filepath.Join(r.dir, file), []byte(msg+"\nline two\n"), 0o644)
	r.w.Add(file)
	sig := &object.Signature{Name: "Ann Novak", Email: "Ann@acme.test", When: t0.Add(time.Duration(m) * time.Minute)}
	opts := &gogit.CommitOptions{Author: sig, Committer: sig}
	if len(parents) > 0 {
		head, _ := r.r.Head()
		opts.Parents = append([]plumbing.Hash{head.Hash()}, parents...)
	}
	h, err := r.w.Commit(msg, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *repo) checkout(branch string, create bool) {
	r.t.Helper()
	if err := r.w.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create}); err != nil {
		r.t.Fatal(err)
	}
}

func poll(t *testing.T, src *git.Source, cursor string) (titles []string, next string) {
	t.Helper()
	for {
		b, err := src.Poll(context.Background(), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range b.Documents {
			titles = append(titles, d.Normalized.Title)
		}
		cursor = b.Cursor
		if !b.More {
			return titles, cursor
		}
	}
}

// branchedRepo is a repository with an initial commit, a feature branch
// with one commit on it, and one more commit on master.
func branchedRepo(t *testing.T) *repo {
	r := newRepo(t)
	r.commit("README.md", "Initial commit", 0)
	r.checkout("feature", true)
	r.commit("feature.go", "Add cropper downscaling (WEB-210)", 5)
	r.checkout("master", false)
	r.commit("deploy.sh", "Fix deploy script, fixes OPS-12", 10)
	return r
}

func TestCommitsArriveOnceInOrder(t *testing.T) {
	t.Parallel()
	r := branchedRepo(t)

	src, err := git.New(git.Config{URL: r.dir, Dir: filepath.Join(t.TempDir(), "clone"), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	titles, cursor := poll(t, src, "")
	// Each commit once (the initial one through feature, polled first), then
	// each branch where it is.
	want := []string{"Initial commit", "Add cropper downscaling (WEB-210)", "branch feature", "Fix deploy script, fixes OPS-12", "branch master"}
	if !slices.Equal(titles, want) {
		t.Fatalf("first poll:\n got %q\nwant %q", titles, want)
	}
	if again, _ := poll(t, src, cursor); len(again) != 0 {
		t.Fatalf("nothing new, got %q", again)
	}

	// An old side branch (its commit predates everything on master since)
	// is merged, with one more commit on top.
	r.checkout("side", true)
	r.w.Reset(&gogit.ResetOptions{Commit: mustRef(t, r, "feature"), Mode: gogit.HardReset})
	side := r.commit("old.txt", "Old experiment", 6)
	r.checkout("master", false)
	r.commit("merge.txt", "Merge side", 20, side)
	r.commit("more.txt", "Tune alerts for OPS-12 and OPS-14", 21)

	titles, _ = poll(t, src, cursor)
	// The old commit comes once, through master (side is polled after it),
	// even though it is older than everything master had.
	want = []string{"Old experiment", "Merge side", "Tune alerts for OPS-12 and OPS-14", "branch master", "branch side"}
	if !slices.Equal(titles, want) {
		t.Fatalf("after merge:\n got %q\nwant %q", titles, want)
	}
}

func mustRef(t *testing.T, r *repo, branch string) plumbing.Hash {
	ref, err := r.r.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Hash()
}

func TestCommitDocument(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit("a.go", "Fix deploy script, fixes OPS-12 and WEB-7", 0)
	src, _ := git.New(git.Config{URL: r.dir, Dir: filepath.Join(t.TempDir(), "clone")})
	b, err := src.Poll(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	d := b.Documents[0]
	m := d.Normalized.Metadata
	files := m["files"].([]git.File)
	if d.ExternalID != m["hash"] || m["author"] != "ann@acme.test" || len(files) != 1 || files[0].Path != "a.go" || files[0].Additions != 2 ||
		!slices.Equal(m["issueKeys"].([]string), []string{"OPS-12", "WEB-7"}) || len(d.Raw) == 0 {
		t.Fatalf("commit: %+v", m)
	}
	if _, err := git.New(git.Config{URL: r.dir}); err == nil {
		t.Fatal("no dir accepted")
	}
	bad, _ := git.New(git.Config{URL: filepath.Join(t.TempDir(), "nope"), Dir: filepath.Join(t.TempDir(), "c")})
	if _, err := bad.Poll(context.Background(), ""); err == nil {
		t.Fatal("missing repository polled")
	}
}

var _ pollers.Source = (*git.Source)(nil)

func TestIssueKeys(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string][]string{
		"[TIMOB-23448] Set Node 4.X as minimum":                               {"TIMOB-23448"},
		"Merge pull request #252 from appcelerator/timob-23941":               {"TIMOB-23941"},
		"Merge pull request #9 from appcelerator/timob-18826_4_0_X\n\nFix it": {"TIMOB-18826"},
		"Merge branch 'ops-12-retry' into main":                               {"OPS-12"},
		"Fix utf-8 handling, see OPS-3 and OPS-3":                             {"OPS-3"},
		"chore: bump dependencies":                                            nil,
		"Merge pull request #5 from someone/hookfix":                          nil,
	} {
		if got := git.IssueKeys(msg); !slices.Equal(got, want) {
			t.Errorf("IssueKeys(%q) = %q, want %q", msg, got, want)
		}
	}
}

// A Git bundle (what `git bundle create --all` writes) is polled like a
// repository: its branches, every commit once; a newer bundle in its place
// brings the new commits.
func TestBundleIsPolledLikeARepository(t *testing.T) {
	t.Parallel()
	r := branchedRepo(t)
	bundle := filepath.Join(t.TempDir(), "repo.bundle")
	writeBundle(t, r.r, bundle)

	dir := filepath.Join(t.TempDir(), "clone")
	// Where an earlier jervis unbundled to, to clone from: removed.
	if err := os.MkdirAll(dir+".unbundled", 0o750); err != nil {
		t.Fatal(err)
	}
	src, err := git.New(git.Config{URL: bundle, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	titles, cursor := poll(t, src, "")
	want := []string{"Initial commit", "Add cropper downscaling (WEB-210)", "branch feature", "Fix deploy script, fixes OPS-12", "branch master"}
	if !slices.Equal(titles, want) {
		t.Fatalf("from the bundle:\n got %q\nwant %q", titles, want)
	}
	b, err := src.Poll(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	// The text names the bundle by its file name, wherever it lies.
	if body := b.Documents[len(b.Documents)-1].Normalized.Body; !strings.HasPrefix(body, "Branch master of repo.bundle is at ") {
		t.Fatalf("branch document: %q", body)
	}
	if _, err := os.Stat(dir + ".unbundled"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old unbundled repository is still there: %v", err)
	}
	// A branch an earlier jervis wrote as a file of its own is moved too
	// (a stale file would hide the packed-refs entry).
	head, _ := r.r.Head()
	if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "master"), []byte(head.Hash().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.commit("more.txt", "Tune alerts for OPS-14", 21)
	writeBundle(t, r.r, bundle)
	// A reference whose name git does not allow (a crafted bundle) is left
	// out; the others are read.
	raw, _ := os.ReadFile(bundle)
	header, rest, _ := bytes.Cut(raw, []byte("\n"))
	bad := fmt.Sprintf("%s\n%s refs/heads/../../escape\n%s", header, head.Hash(), rest)
	if err := os.WriteFile(bundle, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(bundle, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if titles, _ = poll(t, src, cursor); !slices.Equal(titles, []string{"Tune alerts for OPS-14", "branch master"}) {
		t.Fatalf("newer bundle: %q", titles)
	}
	if err := git.Unbundle(filepath.Join("git_test.go"), t.TempDir()); !errors.Is(err, git.ErrNotBundle) {
		t.Fatalf("not a bundle: %v", err)
	}
}

// writeBundle writes a v2 bundle of every branch of repo: the header with
// the references, then a packfile of all objects.
func writeBundle(t *testing.T, repo *gogit.Repository, path string) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# v2 git bundle\n")
	refs, _ := repo.References()
	refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Name().IsBranch() {
			fmt.Fprintf(&b, "%s %s\n", ref.Hash(), ref.Name())
		}
		return nil
	})
	b.WriteString("\n")
	var hashes []plumbing.Hash
	objs, _ := repo.Storer.IterEncodedObjects(plumbing.AnyObject)
	objs.ForEach(func(o plumbing.EncodedObject) error { hashes = append(hashes, o.Hash()); return nil })
	if _, err := packfile.NewEncoder(&b, repo.Storer, false).Encode(hashes, 10); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Committer times are not monotonic in real histories (a rebase, a skewed
// clock): a commit older than its parent, with pages of one commit, still
// lets every commit arrive, parents first.
func TestSkewedCommitTimesLoseNothingAcrossPages(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit("a.txt", "First", 10)
	r.commit("b.txt", "Second, committed with a clock behind", 5)
	r.commit("c.txt", "Third", 20)
	src, _ := git.New(git.Config{URL: r.dir, Dir: filepath.Join(t.TempDir(), "clone"), Batch: 1})
	titles, _ := poll(t, src, "")
	if want := []string{"First", "Second, committed with a clock behind", "Third", "branch master"}; !slices.Equal(titles, want) {
		t.Fatalf("got %q, want %q", titles, want)
	}
}

// A poll reads the clone with its pack files kept open, and closes them
// when it returns: none is left open between polls.
func TestPollLeavesNoPackFileOpen(t *testing.T) {
	if runtime.GOOS != "linux" {
		integration.Missing(t, "/proc/self/fd (Linux)", "CI runs on Linux", "this test counts open files there")
	}
	r := branchedRepo(t)
	clone := filepath.Join(t.TempDir(), "clone")
	src, err := git.New(git.Config{URL: r.dir, Dir: clone})
	if err != nil {
		t.Fatal(err)
	}
	titles, _ := poll(t, src, "")
	if len(titles) < 3 {
		t.Fatalf("polled %q", titles)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, clone) {
			t.Errorf("%s is still open after the poll", target)
		}
	}
}

// A page of many commits is made on several CPUs, each worker reading from
// a repository of its own: its documents are those a page at a time makes,
// in the same order, diff stats included.
func TestManyCommitsMakeTheSameDocumentsInParallel(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	for i := range 90 {
		r.commit(fmt.Sprintf("f%d.txt", i%7), fmt.Sprintf("Change %d for OPS-%d", i, i%5), i)
	}
	all := func(batch int) []store.Document {
		t.Helper()
		src, err := git.New(git.Config{URL: r.dir, Dir: filepath.Join(t.TempDir(), "clone"), Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		var docs []store.Document
		for cursor := ""; ; {
			b, err := src.Poll(context.Background(), cursor)
			if err != nil {
				t.Fatal(err)
			}
			docs, cursor = append(docs, b.Documents...), b.Cursor
			if !b.More {
				return docs
			}
		}
	}
	one, paged := all(500), all(10) // 90 in one page; pages of 10, each made in turn
	if len(one) != 91 || len(paged) != len(one) {
		t.Fatalf("%d and %d documents, want 91 (90 commits and the branch)", len(one), len(paged))
	}
	for i := range one {
		a, b := one[i], paged[i]
		if a.ExternalID != b.ExternalID || !bytes.Equal(a.Raw, b.Raw) || a.Normalized.Title != b.Normalized.Title ||
			a.Normalized.Body != b.Normalized.Body || fmt.Sprint(a.Normalized.Metadata) != fmt.Sprint(b.Normalized.Metadata) {
			t.Fatalf("document %d differs:\n%+v\n%+v", i, a, b)
		}
	}
	if !strings.Contains(one[89].Normalized.Body, "f5.txt (+1 -1)") {
		t.Fatalf("the last commit's diff stats: %q", one[89].Normalized.Body)
	}
}
