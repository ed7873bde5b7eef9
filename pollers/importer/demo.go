package importer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/internal/store"
)

// DemoClient is the client the demo corpus is imported into.
const DemoClient = "demo"

// DemoStore is what the demo import writes to: documents, and the cursor
// of the demo Git connection.
type DemoStore interface {
	Store
	store.Cursors
}

// Demo imports the compiled-in demo corpus (deploy.Demo) into the
// importer's client, unless it has documents already (imported false):
// its emails, Jira issues and Confluence pages as files, and its Git
// history as a repository built under DataDir and read by the git source,
// as connection demo-git (whose cursor is committed, as a poll's is).
func (im *Importer) Demo(ctx context.Context, st DemoStore) (imported bool, err error) {
	have, err := st.ListDocuments(ctx, store.DocumentQuery{Client: im.Client, Limit: 1})
	if err != nil || len(have) > 0 {
		return false, err
	}
	im.Store = st
	for _, dir := range []string{"email", "jira", "confluence"} {
		if err := im.FS(ctx, deploy.Demo(), dir); err != nil {
			return false, fmt.Errorf("demo corpus: %w", err)
		}
	}
	repo := filepath.Join(im.DataDir, "demo", "kestrel-shop")
	if _, err := os.Stat(repo); os.IsNotExist(err) {
		if err := deploy.BuildDemoRepo(repo); err != nil {
			return false, fmt.Errorf("demo git history: %w", err)
		}
	}
	files := im.Connection
	im.Connection = "demo-git"
	defer func() { im.Connection = files }()
	cursor, err := im.repository(ctx, repo, "demo-git")
	if err != nil {
		return false, fmt.Errorf("demo git history: %w", err)
	}
	return true, st.CommitCursor(ctx, "poll:demo-git", cursor)
}
