package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/qualifier"
)

// importSummary is what an import stored and, when it indexed, what the
// indexers made of it.
type importSummary struct {
	importer.Summary
	DataTasks, LinkTasks int64
	Quarantined          int64
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
			fmt.Fprintf(a.stdout, "imported %d files into %s: %s\n", sum.Files, client, sum.Summary)
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

// importPaths stores the files and repositories under paths through the
// importer, then (with index) runs the indexers until no document is
// waiting. A path that cannot be read is reported and the others are
// imported.
func (a *app) importPaths(ctx context.Context, st store.Store, client string, paths []string, index bool) (importSummary, error) {
	return a.importWith(ctx, st, &importer.Importer{Store: st, Kinds: a.kinds, Client: client, Connection: "import", DataDir: a.cfg.DataDir}, paths, index)
}

func (a *app) importWith(ctx context.Context, st store.Store, im *importer.Importer, paths []string, index bool) (importSummary, error) {
	before, err := st.Stats(ctx)
	if err != nil {
		return importSummary{}, err
	}
	bar := a.progress(importer.CountFiles(paths), "storing")
	im.Progress = func(n int) { bar.Add(n) }
	im.Skipped = func(p string, err error) { fmt.Fprintf(a.stderr, "jervis: %s: %v (skipped)\n", p, err) }
	err = im.Paths(ctx, paths)
	sum := importSummary{Summary: im.Summary}
	if err != nil {
		return sum, err
	}
	bar.Finish()
	if !index {
		return sum, nil
	}
	if err := a.indexAll(ctx, st); err != nil {
		return sum, err
	}
	after, err := st.Stats(ctx)
	if err != nil {
		return sum, err
	}
	sum.DataTasks = after.TasksByKind[string(store.KindData)]["NEW"] - before.TasksByKind[string(store.KindData)]["NEW"]
	sum.LinkTasks = after.TasksByKind[string(store.KindLink)]["NEW"] - before.TasksByKind[string(store.KindLink)]["NEW"]
	sum.Quarantined = after.Documents[string(store.DocQuarantined)]
	return sum, nil
}

// indexAll runs the indexer loop until no document is NEW or INDEXING.
func (a *app) indexAll(ctx context.Context, st store.Store) error {
	ix, err := a.indexers(st, a.cfg.Qualifier.UncertainLinks, nil)
	if err != nil {
		return err
	}
	first, err := st.Backlog(ctx)
	if err != nil {
		return err
	}
	bar := a.progress(int(first.Documents["NEW"]), "indexing")
	return runWhile(ctx, st, 100*time.Millisecond, func(s store.Backlog) bool {
		waiting := s.Documents["NEW"] + s.Documents["INDEXING"]
		bar.Set(max(0, int(first.Documents["NEW"]-waiting)))
		if waiting == 0 {
			bar.Finish()
		}
		return waiting == 0
	}, ix)
}

// indexers returns the indexer loop as configured (it polls as serve's
// does: what is stored through a store.Waking wakes it at once), the
// links it records with their documents those the qualifier would record
// under the uncertain-link policy given (qualifier.LinkTriage).
func (a *app) indexers(st store.Store, uncertainLinks string, observe func(string, worker.Outcome, time.Duration)) (*worker.Worker[store.Document], error) {
	links, err := qualifier.LinkTriage(st, uncertainLinks, a.cfg.Qualifier.Model != "")
	if err != nil {
		return nil, err
	}
	return indexers.New(st, indexers.Config{Concurrency: a.cfg.Indexers.Concurrency, BatchSize: a.cfg.Indexers.BatchSize,
		PollInterval: a.cfg.Indexers.PollInterval, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: a.log, Observe: observe, Links: links})
}

// runWhile runs the loops until done accepts the store's backlog, then
// stops them and waits for them. The backlog is read again after
// nextRead: every poll while much waits, sooner as it shrinks.
func runWhile(ctx context.Context, st interface {
	Backlog(context.Context) (store.Backlog, error)
}, poll time.Duration, done func(store.Backlog) bool, loops ...interface{ Run(context.Context) error }) error {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { _ = l.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()
	for {
		s, err := st.Backlog(ctx)
		if err != nil {
			return err
		}
		if done(s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(nextRead(s, poll)):
		}
	}
}

// Reading the backlog again: at most every minRead, and an item waiting
// puts it off by itemRead (a qualifier takes about 2,000 tasks a second
// here, an indexer 1,000 documents), up to the poll.
const (
	minRead  = 10 * time.Millisecond
	itemRead = 100 * time.Microsecond
)

// nextRead is how long runWhile waits after reading backlog b, with poll
// the most. At a whole poll the end of a drain was seen up to a poll late:
// `jervis bench` and `jervis eval` measured the dev Jira corpus's 7.2 s
// drain 0–0.5 s too long, 0–7 % fewer documents/s by where its end fell
// (BENCHMARKS.md, forty-second round). A backlog that nearly empty is a
// few index entries to count.
func nextRead(b store.Backlog, poll time.Duration) time.Duration {
	items := b.Documents.Total() + b.Tasks.Total()
	return min(poll, max(minRead, time.Duration(items)*itemRead))
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
