package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/git"
)

// importSummary is what an import did.
type importSummary struct {
	Files, Skipped, Documents, NewVersions, Unparsable, Unreadable int
	Repositories, Commits                                          int
	DataTasks, LinkTasks                                           int64
	Quarantined                                                    int64
}

func (a *app) importCommand() *cobra.Command {
	var client string
	var noIndex bool
	cmd := &cobra.Command{
		Use:   "import --client C PATH...",
		Short: "Import files (.eml, mbox, Jira/Confluence JSON, storage XHTML, Markdown; also in .tar.gz and .gz) and Git repositories or bundles, and index them",
		Long: `import stores every file under the given paths as source documents of client C,
then runs the indexers until each is INDEXED (or QUARANTINED with its reason, when it
could not be parsed). A path is a file, a directory, a tar archive (.tar, .tar.gz,
.tgz), a gzipped file (x.mbox.gz), a Git repository or a Git bundle (its commits on
every branch). An empty or unreadable file is stored and quarantined with its reason;
import goes on, and fails only when nothing could be stored. Importing the same files
again changes nothing.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if client == "" {
				return errors.New("--client is required")
			}
			if err := store.ValidateClientID(client); err != nil {
				return err
			}
			st, err := a.openStore(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer st.Close()
			sum, err := a.importPaths(cmd.Context(), st, client, paths, !noIndex)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "imported %d files into %s: %d documents (%d new versions, %d unchanged), %d unparsable, %d skipped (unsupported type)",
				sum.Files, client, sum.Documents, sum.NewVersions, sum.Documents-sum.NewVersions, sum.Unparsable, sum.Skipped)
			if sum.Unreadable > 0 {
				fmt.Fprintf(a.stdout, ", %d unreadable", sum.Unreadable)
			}
			if sum.Repositories > 0 {
				fmt.Fprintf(a.stdout, "; %d Git repositories: %d commits and branches", sum.Repositories, sum.Commits)
			}
			fmt.Fprintln(a.stdout)
			if !noIndex {
				fmt.Fprintf(a.stdout, "indexed: %d new DATA_PROCESSING and %d new LINK_PROCESSING tasks; %d documents quarantined in total (see jervis status)\n",
					sum.DataTasks, sum.LinkTasks, sum.Quarantined)
			}
			if sum.Documents == 0 {
				return fmt.Errorf("nothing could be stored from %s (%d files, %d of an unsupported type)", strings.Join(paths, ", "), sum.Files, sum.Skipped)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&client, "client", "", "client the documents belong to (required)")
	cmd.Flags().BoolVar(&noIndex, "no-index", false, "store only; a running jervis serve indexes them")
	return cmd
}

// importer stores what a walk visits as documents of one client, through
// the one ingest path (pollers.Ingester): parse, stamp, store, or store
// with the reason a file could not be parsed or read.
type importer struct {
	st                 store.Store
	kinds              *pollers.Registry
	client, connection string
	dataDir            string // where Git repositories are cloned
	// transform, when set, rewrites a file's content before it is parsed
	// (jervis eval strips the links it measures against).
	transform func(name string, r io.Reader) io.Reader
	bar       *progressbar.ProgressBar
	sum       importSummary
}

func (im *importer) ingester() pollers.Ingester {
	return pollers.Ingester{Store: im.st, Kinds: im.kinds}
}

// file stores one file visited by filedrop.Walk: its documents as they are
// parsed (a mailbox message by message), or, when it cannot be read or
// breaks off, a document that says so.
func (im *importer) file(ctx context.Context) filedrop.VisitFunc {
	return func(name string, r io.Reader, err error) error {
		im.sum.Files++
		im.bar.Add(1)
		if err != nil && filedrop.Archive(name) { // a broken archive: recorded under its own name
			receipts, err := im.ingester().Documents(ctx, im.client, im.connection, im.kinds.Unreadable(name, err))
			im.count(receipts)
			return err
		}
		if im.transform != nil && err == nil {
			r = im.transform(name, r)
		}
		receipts, err := im.ingester().File(ctx, im.client, im.connection, name, r, err)
		if errors.Is(err, pollers.ErrUnsupported) {
			im.sum.Skipped++
			return nil
		}
		im.count(receipts)
		return err
	}
}

// count adds what the ingester stored to the summary.
func (im *importer) count(receipts []pollers.Receipt) {
	for _, r := range receipts {
		im.sum.Documents++
		if r.Created {
			im.sum.NewVersions++
		}
		switch {
		case strings.HasPrefix(r.Unparsable, "unreadable: "):
			im.sum.Unreadable++
			im.sum.Unparsable++
		case r.Unparsable != "":
			im.sum.Unparsable++
		}
	}
}

// repository stores the commits and branches of a Git repository or
// bundle through the git source, cloned under the data directory.
func (im *importer) repository(ctx context.Context, path string) error {
	abs, _ := filepath.Abs(path)
	src, err := git.New(git.Config{URL: abs, Dir: filepath.Join(im.dataDir, "git", "import-"+store.HashID([]byte(abs))[7:])})
	if err != nil {
		return err
	}
	im.sum.Repositories++
	for cursor := ""; ; {
		b, err := src.Poll(ctx, cursor)
		if err != nil {
			return err
		}
		im.sum.Commits += len(b.Documents)
		im.bar.Add(len(b.Documents))
		receipts, err := im.ingester().Documents(ctx, im.client, im.connection, b.Documents...)
		im.count(receipts)
		if err != nil {
			return err
		}
		if cursor = b.Cursor; !b.More {
			return nil
		}
	}
}

// isRepository reports whether path is a Git repository (a work tree or a
// bare one) or a Git bundle.
func isRepository(path string) bool {
	if git.IsBundle(path) {
		return true
	}
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return false
	}
	_, err := gogit.PlainOpen(path)
	return err == nil
}

// importPaths stores the files and repositories under paths, then (with
// index) runs the indexers until no document is waiting. A path that
// cannot be read is reported and the others are imported.
func (a *app) importPaths(ctx context.Context, st store.Store, client string, paths []string, index bool) (importSummary, error) {
	return a.importWith(ctx, &importer{st: st, kinds: a.kinds, client: client, connection: "import", dataDir: a.cfg.DataDir}, paths, index)
}

func (a *app) importWith(ctx context.Context, im *importer, paths []string, index bool) (importSummary, error) {
	if _, err := im.st.PutClient(ctx, store.Client{ID: im.client, Name: im.client}); err != nil {
		return im.sum, err
	}
	before, err := im.st.Stats(ctx)
	if err != nil {
		return im.sum, err
	}
	im.bar = a.progress(countFiles(paths), "storing")
	for _, p := range paths {
		if isRepository(p) {
			err = im.repository(ctx, p)
		} else {
			err = filedrop.Walk(p, im.file(ctx))
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			fmt.Fprintf(a.stderr, "jervis: %s: %v (skipped)\n", p, err)
			continue
		}
		if err != nil {
			return im.sum, err
		}
	}
	im.bar.Finish()
	if !index {
		return im.sum, nil
	}
	if err := a.indexAll(ctx, im.st); err != nil {
		return im.sum, err
	}
	after, err := im.st.Stats(ctx)
	if err != nil {
		return im.sum, err
	}
	im.sum.DataTasks = after.TasksByKind[string(store.KindData)]["NEW"] - before.TasksByKind[string(store.KindData)]["NEW"]
	im.sum.LinkTasks = after.TasksByKind[string(store.KindLink)]["NEW"] - before.TasksByKind[string(store.KindLink)]["NEW"]
	im.sum.Quarantined = after.Documents[string(store.DocQuarantined)]
	return im.sum, nil
}

// countFiles counts the files under paths for the progress bar; -1 (a
// spinner) when an archive or a repository makes the number unknown.
func countFiles(paths []string) int {
	n, unknown := 0, false
	for _, root := range paths {
		if isRepository(root) {
			return -1
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
			case d.IsDir() && p != root && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			case filedrop.Archive(p):
				unknown = true
				return fs.SkipAll
			case !d.IsDir():
				n++
			}
			return nil
		})
	}
	if unknown {
		return -1
	}
	return n
}

// indexAll runs the indexer loop until no document is NEW or INDEXING.
func (a *app) indexAll(ctx context.Context, st store.Store) error {
	ix, err := a.indexers(st)
	if err != nil {
		return err
	}
	first, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	bar := a.progress(int(first.Documents["NEW"]), "indexing")
	return runWhile(ctx, st, 100*time.Millisecond, func(s store.Stats) bool {
		waiting := s.Documents["NEW"] + s.Documents["INDEXING"]
		bar.Set(max(0, int(first.Documents["NEW"]-waiting)))
		if waiting == 0 {
			bar.Finish()
		}
		return waiting == 0
	}, ix)
}

// indexers returns the indexer loop as configured, polling often (a
// command that waits for it).
func (a *app) indexers(st store.Store) (*worker.Worker[store.Document], error) {
	return indexers.New(st, indexers.Config{Concurrency: a.cfg.Indexers.Concurrency, BatchSize: a.cfg.Indexers.BatchSize,
		PollInterval: 20 * time.Millisecond, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: a.log})
}

// runWhile runs the loops until done accepts the store's counts (read
// every poll), then stops them and waits for them.
func runWhile(ctx context.Context, st interface {
	Stats(context.Context) (store.Stats, error)
}, poll time.Duration, done func(store.Stats) bool, loops ...interface{ Run(context.Context) error }) error {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { _ = l.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			return err
		}
		if done(s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// progress returns a progress bar on stderr when it is a terminal, and a
// silent one otherwise (logs and CI get the summary line instead).
func (a *app) progress(total int, what string) *progressbar.ProgressBar {
	var w io.Writer = io.Discard
	if f, ok := a.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		w = f
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
}
