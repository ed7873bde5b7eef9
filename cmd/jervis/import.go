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

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/filedrop"
)

// importSummary is what an import did.
type importSummary struct {
	Files, Skipped, Documents, NewVersions, Unparsable int
	DataTasks, LinkTasks                               int64
	Quarantined                                        int64
}

func (a *app) importCommand() *cobra.Command {
	var client string
	var noIndex bool
	cmd := &cobra.Command{
		Use:   "import --client C PATH...",
		Short: "Import files (.eml, mbox, Jira/Confluence JSON, storage XHTML, Markdown) and index them",
		Long: `import stores every file under the given paths as source documents of client C,
then runs the indexers until each is INDEXED (or QUARANTINED with its reason, when it
could not be parsed). Importing the same files again changes nothing.`,
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
			fmt.Fprintf(a.stdout, "imported %d files into %s: %d documents (%d new versions, %d unchanged), %d unparsable, %d skipped (unsupported type)\n",
				sum.Files, client, sum.Documents, sum.NewVersions, sum.Documents-sum.NewVersions, sum.Unparsable, sum.Skipped)
			if !noIndex {
				fmt.Fprintf(a.stdout, "indexed: %d new DATA_PROCESSING and %d new LINK_PROCESSING tasks; %d documents quarantined in total (see jervis status)\n",
					sum.DataTasks, sum.LinkTasks, sum.Quarantined)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&client, "client", "", "client the documents belong to (required)")
	cmd.Flags().BoolVar(&noIndex, "no-index", false, "store only; a running jervis serve indexes them")
	return cmd
}

// entry is one file to import: its name (relative to what was imported,
// used as the external ID of text files) and how to read it.
type entry struct {
	name string
	read func() ([]byte, error)
}

// importPaths stores the files under paths, then (with index) runs the
// indexers until no document is waiting.
func (a *app) importPaths(ctx context.Context, st store.Store, client string, paths []string, index bool) (importSummary, error) {
	var entries []entry
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			name := path
			if rel, err := filepath.Rel(root, path); err == nil && rel != "." {
				name = rel
			}
			entries = append(entries, entry{name: name, read: func() ([]byte, error) { return os.ReadFile(path) }})
			return nil
		})
		if err != nil {
			return importSummary{}, err
		}
	}
	return a.importEntries(ctx, st, client, "import", entries, index)
}

// fsEntries lists the files of fsys under dir.
func fsEntries(fsys fs.FS, dir string) ([]entry, error) {
	var entries []entry
	err := fs.WalkDir(fsys, dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		entries = append(entries, entry{name: path, read: func() ([]byte, error) { return fs.ReadFile(fsys, path) }})
		return nil
	})
	return entries, err
}

func (a *app) importEntries(ctx context.Context, st store.Store, client, connection string, entries []entry, index bool) (importSummary, error) {
	var sum importSummary
	if _, err := st.PutClient(ctx, store.Client{ID: client, Name: client}); err != nil {
		return sum, err
	}
	before, err := st.Stats(ctx)
	if err != nil {
		return sum, err
	}
	bar := a.progress(len(entries), "storing")
	for _, e := range entries {
		sum.Files++
		raw, err := e.read()
		if err != nil {
			return sum, err
		}
		docs, err := filedrop.Parse(e.name, raw)
		if errors.Is(err, filedrop.ErrUnsupported) {
			sum.Skipped++
			bar.Add(1)
			continue
		}
		for _, d := range docs {
			d.Client, d.Connection = client, connection
			if _, bad := d.Normalized.Metadata[store.MetaParseError]; bad {
				sum.Unparsable++
			}
			_, created, err := st.PutDocument(ctx, d)
			if err != nil {
				return sum, fmt.Errorf("%s: %w", e.name, err)
			}
			sum.Documents++
			if created {
				sum.NewVersions++
			}
		}
		bar.Add(1)
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
	ix, err := indexers.New(st, indexers.Config{Concurrency: a.cfg.Indexers.Concurrency, BatchSize: a.cfg.Indexers.BatchSize,
		PollInterval: 20 * time.Millisecond, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: a.log})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = ix.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()
	stats, _ := st.Stats(ctx)
	bar := a.progress(int(stats.Documents["NEW"]), "indexing")
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			return err
		}
		waiting := s.Documents["NEW"] + s.Documents["INDEXING"]
		bar.Set(max(0, int(stats.Documents["NEW"]-waiting)))
		if waiting == 0 {
			bar.Finish()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
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
