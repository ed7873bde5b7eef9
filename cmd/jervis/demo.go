package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/git"
)

// DemoClient is the client the demo corpus is imported into.
const DemoClient = "demo"

// loadDemo imports the compiled-in demo corpus into client demo, unless it
// has documents already: emails, Jira issues and Confluence pages as files,
// and the git history as a repository built under the data directory and
// polled like any other. The indexers (of this process, or another one on
// the same store) index them.
func (a *app) loadDemo(ctx context.Context, st store.Store) error {
	have, err := st.ListDocuments(ctx, store.DocumentQuery{Client: DemoClient, Limit: 1})
	if err != nil {
		return err
	}
	if len(have) > 0 {
		a.log.Info("demo corpus already imported", "client", DemoClient)
		return nil
	}
	start := time.Now()
	var entries []entry
	for _, dir := range []string{"email", "jira", "confluence"} {
		es, err := fsEntries(deploy.Demo(), dir)
		if err != nil {
			return err
		}
		entries = append(entries, es...)
	}
	sum, err := a.importEntries(ctx, st, DemoClient, "demo", entries, false)
	if err != nil {
		return fmt.Errorf("demo corpus: %w", err)
	}
	commits, err := a.demoGit(ctx, st)
	if err != nil {
		return fmt.Errorf("demo git history: %w", err)
	}
	a.log.Info("demo corpus imported", "client", DemoClient, "documents", sum.Documents+commits, "files", sum.Files, "git_documents", commits, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

type demoCommit struct {
	Message, Author, Email, Branch string
	When                           time.Time
	Files                          map[string]string
}

// demoGit builds the demo repository from git/commits.json (once) and
// stores its commits through the git source.
func (a *app) demoGit(ctx context.Context, st store.Store) (int, error) {
	raw, err := fs.ReadFile(deploy.Demo(), "git/commits.json")
	if err != nil {
		return 0, err
	}
	var commits []demoCommit
	if err := json.Unmarshal(raw, &commits); err != nil {
		return 0, err
	}
	repoDir := filepath.Join(a.cfg.DataDir, "demo", "kestrel-shop")
	if _, err := os.Stat(repoDir); os.IsNotExist(err) {
		if err := buildRepo(repoDir, commits); err != nil {
			os.RemoveAll(repoDir)
			return 0, err
		}
	}
	src, err := git.New(git.Config{URL: repoDir, Dir: filepath.Join(a.cfg.DataDir, "git", "demo-git")})
	if err != nil {
		return 0, err
	}
	n, cursor := 0, ""
	for {
		b, err := src.Poll(ctx, cursor)
		if err != nil {
			return n, err
		}
		for _, d := range b.Documents {
			d.Client, d.Connection = DemoClient, "demo-git"
			if _, _, err := st.PutDocument(ctx, d); err != nil {
				return n, err
			}
			n++
		}
		if cursor = b.Cursor; !b.More {
			break
		}
	}
	return n, st.CommitCursor(ctx, "poll:demo-git", cursor)
}

func buildRepo(dir string, commits []demoCommit) error {
	r, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{InitOptions: gogit.InitOptions{DefaultBranch: plumbing.Main}})
	if err != nil {
		return err
	}
	w, err := r.Worktree()
	if err != nil {
		return err
	}
	branch := "main"
	for i, c := range commits {
		if c.Branch != branch && i > 0 {
			name := plumbing.NewBranchReferenceName(c.Branch)
			_, err := r.Reference(name, false)
			if err := w.Checkout(&gogit.CheckoutOptions{Branch: name, Create: err != nil}); err != nil {
				return err
			}
			branch = c.Branch
		}
		for name, body := range c.Files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return err
			}
			if _, err := w.Add(name); err != nil {
				return err
			}
		}
		sig := &object.Signature{Name: c.Author, Email: c.Email, When: c.When}
		if _, err := w.Commit(c.Message, &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			return err
		}
	}
	return nil
}
