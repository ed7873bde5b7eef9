package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
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
	if _, err := st.PutClient(ctx, store.Client{ID: DemoClient, Name: DemoClient}); err != nil {
		return err
	}
	im := &importer{st: st, kinds: a.kinds, client: DemoClient, connection: "demo", bar: a.progress(0, "demo")}
	for _, dir := range []string{"email", "jira", "confluence"} {
		if err := filedrop.WalkFS(deploy.Demo(), dir, im.file(ctx)); err != nil {
			return fmt.Errorf("demo corpus: %w", err)
		}
	}
	sum := im.sum
	commits, err := a.demoGit(ctx, st)
	if err != nil {
		return fmt.Errorf("demo git history: %w", err)
	}
	a.log.Info("demo corpus imported", "client", DemoClient, "documents", sum.Documents+commits, "files", sum.Files, "git_documents", commits, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// demoGit builds the demo repository from git/commits.json (once) and
// stores its commits through the git source.
func (a *app) demoGit(ctx context.Context, st store.Store) (int, error) {
	repoDir := filepath.Join(a.cfg.DataDir, "demo", "kestrel-shop")
	if _, err := os.Stat(repoDir); os.IsNotExist(err) {
		if err := deploy.BuildDemoRepo(repoDir); err != nil {
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
		receipts, err := pollers.Ingester{Store: st, Kinds: a.kinds}.Documents(ctx, DemoClient, "demo-git", b.Documents...)
		n += len(receipts)
		if err != nil {
			return n, err
		}
		if cursor = b.Cursor; !b.More {
			break
		}
	}
	return n, st.CommitCursor(ctx, "poll:demo-git", cursor)
}
