// Package git polls Git repositories (go-git, pure Go): it clones a remote
// or local repository into a directory it owns, fetches on every poll, and
// returns per branch the commits that are new since the branch's last seen
// head — every commit reachable from the head and not from the last head,
// so commits merged from an old side branch are not missed — oldest first.
//
// A commit is one document whatever branches it is on (external ID: its
// hash; content: the raw commit object). Kept: message, author, committer
// time, parents, files changed with line counts, and issue keys mentioned in
// the message (OPS-12). Each branch is also a document of its own (external
// ID "branch:NAME") whose new versions record where the branch moved.
package git

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// Config configures a Source.
type Config struct {
	URL      string   // remote URL, local path or Git bundle file
	Dir      string   // where the clone lives (created on first poll)
	Branches []string // default: every branch of the remote
	Batch    int      // commits per poll page (default 500)
	// Token, when set, authenticates an HTTP(S) remote (Basic auth with
	// Username, default "git": what GitHub, GitLab and Gitea accept with a
	// personal access token), so the URL needs no userinfo. A URL with
	// userinfo is used as it is; errors never show its secret.
	Username, Token string
}

// Source polls one repository.
type Source struct {
	cfg Config
}

var _ pollers.Source = (*Source)(nil)

// New returns a source; it does not touch the repository.
func New(cfg Config) (*Source, error) {
	if cfg.URL == "" || cfg.Dir == "" {
		return nil, errors.New("git: url and dir are required")
	}
	cfg.Batch = cmp.Or(cfg.Batch, 500)
	return &Source{cfg: cfg}, nil
}

var (
	issueKey = regexp.MustCompile(`\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b`)
	// A merge names the branch it merges, and branches are often named
	// after their issue in lower case: "Merge pull request #252 from
	// owner/timob-23941", "Merge branch 'ops-12-fix' into main".
	mergedBranch = regexp.MustCompile(`(?m)^Merge (?:pull request #[0-9]+ from [^/\s]+/|(?:remote-tracking )?branch '|branch ")([^\s'"]+)`)
	branchKey    = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])([a-z][a-z]{1,9})[-_]([0-9]{1,7})(?:[^0-9]|$)`)
)

// IssueKeys returns the issue keys a commit message cites (OPS-12), and
// those in the name of the branch a merge commit merges, in any case
// (timob-23941 → TIMOB-23941), sorted, without repeats.
func IssueKeys(message string) []string {
	keys := issueKey.FindAllString(message, 50)
	for _, m := range mergedBranch.FindAllStringSubmatch(message, 5) {
		for _, k := range branchKey.FindAllStringSubmatch(m[1], 5) {
			keys = append(keys, strings.ToUpper(k[1])+"-"+k[2])
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// openBundle reads a Git bundle file: it is unbundled into Dir (again
// whenever the file changes: its objects are added, its branches moved),
// and Dir is read as it is, without a clone of it. A repository that an
// earlier jervis unbundled beside Dir (Dir.unbundled), to clone from, is
// removed.
func (s *Source) openBundle() (repo *gogit.Repository, done func(), err error) {
	info, err := os.Stat(s.cfg.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("git: %w", err)
	}
	stamp := fmt.Sprintf("%d %d", info.Size(), info.ModTime().UnixNano())
	marker := filepath.Join(s.cfg.Dir, "jervis-bundle")
	if b, err := os.ReadFile(marker); err != nil || string(b) != stamp {
		if err := Unbundle(s.cfg.URL, s.cfg.Dir); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(marker, []byte(stamp), 0o640); err != nil {
			return nil, nil, fmt.Errorf("git: %w", err)
		}
		os.RemoveAll(strings.TrimRight(s.cfg.Dir, `/\`) + ".unbundled")
	}
	if repo, done, err = reading(s.cfg.Dir); err != nil {
		return nil, nil, fmt.Errorf("git: open %s: %w", s.cfg.Dir, err)
	}
	return repo, done, nil
}

// auth is the token's Basic auth for an HTTP(S) remote (nil: none, or the
// URL's own userinfo).
func (s *Source) auth() transport.AuthMethod {
	if s.cfg.Token == "" || !strings.HasPrefix(s.cfg.URL, "http://") && !strings.HasPrefix(s.cfg.URL, "https://") {
		return nil
	}
	return &githttp.BasicAuth{Username: cmp.Or(s.cfg.Username, "git"), Password: s.cfg.Token}
}

// open clones the repository on first use and fetches it afterwards (a
// bundle file is unbundled instead: openBundle). It is
// read with its pack files kept open until done is called: go-git's
// default storage opens a pack file again for every object it reads (a
// fifth of a bundle's import, the commits' diffs reading many objects
// each).
func (s *Source) open(ctx context.Context) (repo *gogit.Repository, done func(), err error) {
	if IsBundle(s.cfg.URL) {
		return s.openBundle()
	}
	url := s.cfg.URL
	repo, done, err = reading(s.cfg.Dir)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		if err := os.MkdirAll(s.cfg.Dir, 0o750); err != nil {
			return nil, nil, fmt.Errorf("git: %w", err)
		}
		_, err = gogit.PlainCloneContext(ctx, s.cfg.Dir, true, &gogit.CloneOptions{URL: url, Auth: s.auth(), NoCheckout: true, Tags: gogit.NoTags})
		if err != nil {
			os.RemoveAll(s.cfg.Dir)
			return nil, nil, fmt.Errorf("git: clone %s: %w", redact.URL(s.cfg.URL), errors.New(redact.Text(err.Error())))
		}
		repo, done, err = reading(s.cfg.Dir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("git: open %s: %w", s.cfg.Dir, err)
	}
	// Every branch of the remote as a local branch (a clone has HEAD's only).
	err = repo.FetchContext(ctx, &gogit.FetchOptions{RemoteURL: url, Auth: s.auth(), RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*"}, Tags: gogit.NoTags, Force: true})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		done()
		return nil, nil, fmt.Errorf("git: fetch %s: %w", redact.URL(s.cfg.URL), errors.New(redact.Text(err.Error())))
	}
	return repo, done, nil
}

// reading opens the repository at dir (bare, or its .git) with its pack
// files kept open until done is called.
func reading(dir string) (repo *gogit.Repository, done func(), err error) {
	return readingWith(dir, cache.DefaultMaxSize)
}

// readingWith is reading with an object cache of at most cacheSize.
func readingWith(dir string, cacheSize cache.FileSize) (repo *gogit.Repository, done func(), err error) {
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, ".git") // a repository with a work tree
	}
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(cacheSize), filesystem.Options{KeepDescriptors: true})
	if repo, err = gogit.Open(st, nil); err != nil {
		st.Close()
		return nil, nil, err
	}
	return repo, func() { st.Close() }, nil
}

// Poll implements pollers.Source. The cursor maps each branch to the last
// head taken.
func (s *Source) Poll(ctx context.Context, cur string) (pollers.Batch, error) {
	heads := map[string]string{}
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &heads); err != nil {
			return pollers.Batch{}, fmt.Errorf("git: cursor: %w", err)
		}
	}
	repo, done, err := s.open(ctx)
	if err != nil {
		return pollers.Batch{}, err
	}
	defer done()
	branches := s.cfg.Branches
	if len(branches) == 0 {
		refs, err := repo.References()
		if err != nil {
			return pollers.Batch{}, fmt.Errorf("git: %w", err)
		}
		refs.ForEach(func(r *plumbing.Reference) error {
			if r.Name().IsBranch() {
				branches = append(branches, r.Name().Short())
			}
			return nil
		})
		slices.Sort(branches)
	}
	var batch pollers.Batch
	budget := s.cfg.Batch
	for _, br := range branches {
		if budget <= 0 {
			batch.More = true
			break
		}
		ref, err := repo.Reference(plumbing.NewBranchReferenceName(br), true)
		if err != nil {
			return pollers.Batch{}, fmt.Errorf("git: branch %s: %w", br, err)
		}
		head := ref.Hash()
		if heads[br] == head.String() {
			continue
		}
		// What any branch already took is not new on this one.
		var known []plumbing.Hash
		for _, h := range heads {
			known = append(known, plumbing.NewHash(h))
		}
		commits, err := newCommits(ctx, repo, head, known)
		if err != nil {
			return pollers.Batch{}, fmt.Errorf("git: branch %s: %w", br, err)
		}
		// Oldest first; a page ends at a commit, and the branch's cursor
		// moves to it, so the next page starts after it.
		moved := head
		if len(commits) > budget {
			commits, moved, batch.More = commits[:budget], commits[budget-1].Hash, true
		}
		docs, err := s.documents(ctx, repo, commits)
		if err != nil {
			return pollers.Batch{}, err
		}
		batch.Documents = append(batch.Documents, docs...)
		budget -= len(commits)
		heads[br] = moved.String()
		if moved == head { // caught up: record where the branch is
			batch.Documents = append(batch.Documents, branchDocument(redact.URL(s.cfg.URL), br, head))
		}
	}
	b, _ := json.Marshal(heads)
	batch.Cursor = string(b)
	return batch, nil
}

// parallelFrom is how many commits a page needs before their documents are
// made on several CPUs (parallelWorkers at most).
const (
	parallelFrom    = 64
	parallelWorkers = 4
	// workerCache bounds the object cache of a worker's own repository:
	// a third of go-git's default (96 MiB), so that the workers together
	// hold at most twice what one repository may (the dev bundle's import
	// took the same time with it: 6.65, 7.36 s against 7.00, 7.49 s).
	workerCache = 32 * cache.MiByte
)

// documents returns the commits' documents, in their order. A commit's
// document holds its diff stats, which need every file it changed read and
// diffed (diffStat): the most of a bundle's import (2,043 commits of the
// dev corpus: 2.3 of 4.9 CPU-s). A page of parallelFrom commits or more is
// shared among up to one worker per CPU; go-git is not safe for concurrent
// use of one repository (go-git/go-git#48, #773), so every worker but the
// first reads the commits again from a repository of its own, opened on the
// same directory, as its maintainers advise (one that cannot open it leaves
// its commits to the others).
func (s *Source) documents(ctx context.Context, repo *gogit.Repository, commits []*object.Commit) ([]store.Document, error) {
	docs := make([]store.Document, len(commits))
	workers := min(runtime.GOMAXPROCS(0), parallelWorkers)
	if len(commits) < parallelFrom || workers < 2 {
		for i, c := range commits {
			d, err := document(c)
			if err != nil {
				return nil, err
			}
			docs[i] = d
		}
		return docs, nil
	}
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := repo
			if w > 0 {
				r, done, err := readingWith(s.cfg.Dir, workerCache)
				if err != nil {
					return // the others take its commits (the first has the poll's repository)
				}
				defer done()
				own = r
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(commits) || ctx.Err() != nil {
					return
				}
				c := commits[i]
				if w > 0 {
					var err error
					if c, err = own.CommitObject(c.Hash); err != nil {
						errs[w] = fmt.Errorf("git: commit %s: %w", commits[i].Hash, err)
						next.Store(int64(len(commits)))
						return
					}
				}
				d, err := document(c)
				if err != nil {
					errs[w] = err
					next.Store(int64(len(commits)))
					return
				}
				docs[i] = d
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return docs, nil
}

// newCommits returns the commits reachable from head and from none of
// known, parents before children, and otherwise oldest first (by committer
// time, then hash). Committer times are not monotonic in real histories (a
// rebase, a skewed clock), so time alone could put a commit after a child
// of it; a page cut at that child would then move the cursor past it.
func newCommits(ctx context.Context, repo *gogit.Repository, head plumbing.Hash, known []plumbing.Hash) ([]*object.Commit, error) {
	seen := map[plumbing.Hash]bool{}
	for _, k := range known {
		if k.IsZero() || seen[k] {
			continue
		}
		err := walk(ctx, repo, k, func(c *object.Commit) bool {
			if seen[c.Hash] {
				return false
			}
			seen[c.Hash] = true
			return true
		})
		if err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) { // a rewritten branch: its old head is gone
			return nil, err
		}
	}
	var out []*object.Commit
	err := walk(ctx, repo, head, func(c *object.Commit) bool {
		if seen[c.Hash] {
			return false // and its ancestors: old already reaches them
		}
		seen[c.Hash] = true
		out = append(out, c)
		return true
	})
	return topological(out), err
}

// topological orders commits parents first, picking among the commits
// whose parents (in the set) are all placed the oldest by committer time,
// then hash.
func topological(commits []*object.Commit) []*object.Commit {
	older := func(a, b *object.Commit) int {
		return cmp.Or(a.Committer.When.Compare(b.Committer.When), strings.Compare(a.Hash.String(), b.Hash.String()))
	}
	in := make(map[plumbing.Hash]bool, len(commits))
	for _, c := range commits {
		in[c.Hash] = true
	}
	waiting := map[plumbing.Hash]int{}               // parents in the set not yet placed
	children := map[plumbing.Hash][]*object.Commit{} // in the set
	var ready []*object.Commit
	for _, c := range commits {
		for _, p := range c.ParentHashes {
			if in[p] {
				waiting[c.Hash]++
				children[p] = append(children[p], c)
			}
		}
		if waiting[c.Hash] == 0 {
			ready = append(ready, c)
		}
	}
	out := make([]*object.Commit, 0, len(commits))
	for len(ready) > 0 {
		i := 0
		for j := range ready {
			if older(ready[j], ready[i]) < 0 {
				i = j
			}
		}
		c := ready[i]
		ready = slices.Delete(ready, i, i+1)
		out = append(out, c)
		for _, ch := range children[c.Hash] {
			if waiting[ch.Hash]--; waiting[ch.Hash] == 0 {
				ready = append(ready, ch)
			}
		}
	}
	return out
}

// walk visits commits from start through their parents; visit returns
// false to stop following a commit's parents. A missing start is
// plumbing.ErrObjectNotFound.
func walk(ctx context.Context, repo *gogit.Repository, start plumbing.Hash, visit func(*object.Commit) bool) error {
	queue := []plumbing.Hash{start}
	done := map[plumbing.Hash]bool{}
	for len(queue) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h := queue[0]
		queue = queue[1:]
		if done[h] {
			continue
		}
		done[h] = true
		c, err := repo.CommitObject(h)
		if err != nil {
			return fmt.Errorf("commit %s: %w", h, err)
		}
		if visit(c) {
			queue = append(queue, c.ParentHashes...)
		}
	}
	return nil
}

// File is a changed file of a commit.
type File struct {
	Path      string `json:"path"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

func document(c *object.Commit) (store.Document, error) {
	enc := &plumbing.MemoryObject{}
	if err := c.Encode(enc); err != nil {
		return store.Document{}, fmt.Errorf("git: encode %s: %w", c.Hash, err)
	}
	r, _ := enc.Reader()
	raw, _ := io.ReadAll(r)
	var files []File
	var listing strings.Builder
	if stats, err := diffStat(context.Background(), c); err == nil {
		files = stats
		for _, f := range files {
			fmt.Fprintf(&listing, "\n  %s (+%d -%d)", f.Path, f.Additions, f.Deletions)
		}
	}
	parents := make([]string, len(c.ParentHashes))
	for i, p := range c.ParentHashes {
		parents[i] = p.String()
	}
	title, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	meta := CommitMeta{Hash: c.Hash.String(), Author: strings.ToLower(c.Author.Email), AuthorName: c.Author.Name,
		Committed: c.Committer.When.UTC().Format("2006-01-02T15:04:05Z"), Parents: parents, Files: files, IssueKeys: IssueKeys(c.Message)}
	if ce := strings.ToLower(c.Committer.Email); ce != meta.Author || c.Committer.Name != meta.AuthorName {
		meta.Committer, meta.CommitterName = ce, c.Committer.Name
	}
	body := strings.TrimSpace(c.Message)
	if listing.Len() > 0 {
		body += "\n\nFiles changed:" + listing.String()
	}
	return store.Document{
		SourceType: store.SourceGit, ExternalID: c.Hash.String(), Raw: raw, ObservedAt: c.Committer.When,
		Normalized: store.Normalized{Title: title, Body: body, Metadata: pollers.MetaMap(meta)},
	}, nil
}

// CommitMeta is a commit document's metadata (Normalized.Metadata).
type CommitMeta struct {
	Hash       string `json:"hash"`
	Author     string `json:"author"` // e-mail, lower-cased
	AuthorName string `json:"authorName"`
	// Committer is the committer's e-mail (lower-cased) and name, when not
	// the author's.
	Committer     string   `json:"committer,omitempty"`
	CommitterName string   `json:"committerName,omitempty"`
	Committed     string   `json:"committed"`
	Parents       []string `json:"parents"`
	Files         []File   `json:"files,omitempty"`
	IssueKeys     []string `json:"issueKeys,omitempty"`
}

// BranchMeta is a branch document's metadata: where the branch is.
type BranchMeta struct {
	Branch     string `json:"branch"`
	Head       string `json:"head"`
	Repository string `json:"repository"`
}

// branchDocument is a branch's document. Its text names a remote
// repository by its URL (credentials removed) and a local one — a
// directory, a bundle file — by its base name, so that the text is the
// same wherever the files lie; the metadata keeps the whole location.
func branchDocument(repoURL, branch string, head plumbing.Hash) store.Document {
	raw := []byte(branch + " " + head.String())
	name := repoURL
	if ep, err := transport.NewEndpoint(repoURL); err == nil && ep.Protocol == "file" {
		name = filepath.Base(filepath.Clean(ep.Path))
	}
	return store.Document{
		SourceType: store.SourceGit, ExternalID: "branch:" + branch, Raw: raw,
		Normalized: store.Normalized{Title: "branch " + branch, Body: fmt.Sprintf("Branch %s of %s is at %s.", branch, name, head),
			Metadata: pollers.MetaMap(BranchMeta{Branch: branch, Head: head.String(), Repository: repoURL})},
	}
}
