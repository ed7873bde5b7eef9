package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/eval"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/git"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/qualifier"
)

// errFloors is returned when an eval run crosses a floor.
var errFloors = errors.New("eval: floors crossed")

func (a *app) evalCommand() *cobra.Command {
	var asJSON, check, encoder bool
	var client, keep string
	var minDupRecall, minDupLead float64
	cmd := &cobra.Command{
		Use:   "eval [--json] [--client C] [--check] [--keep DIR] PATH...",
		Short: "Measure the knowledge base built from real corpora: completeness, structure recall, duplicate finding beside a BM25 peer, junk, identities, cost",
		Long: `eval runs the whole pipeline (embedded stores, rules qualifier, no network) on a fresh
data directory over real corpora — Jira REST JSON (directories or .tar.gz), mailboxes and
.eml files (also .gz), Git repositories or bundles, Confluence exports; several paths go
into one client — and measures the knowledge base against the labels the data carries:

  completeness    items in (counted from the raw files), stored, indexed, quarantined (by
                  reason), kept with warnings, lost; tasks by state, FAILED by class
  structure       email threads (each reply reaches its nearest ancestor in the corpus along
                  replies_to edges), Jira issue links of every type, commit → issue keys
  duplicates      Jira Duplicate links are stripped before import; each duplicate's summary
                  is searched (default settings, as POST /api/v1/search) for its original:
                  recall@10 and MRR@10 over distinct issues, beside a textbook BM25 peer
                  (k1 1.2, b 0.75, summary + description + comments) computed in the run;
                  the parts of search alone (the ablation); by vectors of an encoder
                  trained on the client's items, one per issue, also with the duplicates
                  left out of its training
  junk            nodes of types the rules do not produce, per 1,000 nodes
  identities      person refs the sources name and the people resolution made of them,
                  merges by stage, ambiguous names left; against what the data carries:
                  Git author names written with several addresses (one person each), Jira
                  accounts named as exactly one Git author (that person), and issues whose
                  assignee wrote commits (one within two hops of the issue)
  cost            documents/s end to end, per stage, peak RSS, bytes on disk per document;
                  the encoder's training and the replay

After the import is drained the client's own encoder is trained and its documents replayed
with it (as POST /admin/v1/clients/{client}/encoder does), and everything is measured after
that; --encoder=false measures the configured embedder's vectors instead.

--check exits non-zero when a floor is crossed (quarantined > 0.5 %, an item lost, a FAILED
task, thread recall < 0.98, issue-link recall < 0.99, commit → issue recall < 0.98, more
than 1 junk node per 1,000, duplicate recall@10 less than the peer's + 0.10, and with the
client's encoder, duplicate recall@10 by vectors alone < 0.46).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if err := store.ValidateClientID(client); err != nil {
				return err
			}
			report, err := a.eval(cmd.Context(), client, keep, encoder, paths)
			if err != nil {
				return err
			}
			if asJSON {
				if err := a.printJSON(report); err != nil {
					return err
				}
			} else if err := report.Print(a.stdout); err != nil {
				return err
			}
			if !check {
				return nil
			}
			floors := eval.DefaultFloors
			floors.MinDuplicateRecall, floors.MinDuplicateLead = minDupRecall, minDupLead
			if crossed := report.Check(floors); len(crossed) > 0 {
				for _, c := range crossed {
					fmt.Fprintln(a.stderr, "FLOOR CROSSED:", c)
				}
				return errFloors
			}
			fmt.Fprintln(a.stderr, "eval: every floor met")
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&client, "client", "eval", "client the corpora are imported into")
	cmd.Flags().BoolVar(&check, "check", false, "exit non-zero when a quality floor is crossed (CI)")
	cmd.Flags().Float64Var(&minDupRecall, "min-duplicate-recall", 0, "with --check, the lowest duplicate recall@10 accepted (0: reported only)")
	cmd.Flags().Float64Var(&minDupLead, "min-duplicate-lead", eval.DefaultFloors.MinDuplicateLead,
		"with --check, how far duplicate recall@10 must be ahead of the in-run BM25 peer's (capped at 1)")
	cmd.Flags().BoolVar(&encoder, "encoder", true, "after the import, train the client's own encoder and replay its documents with it (as POST /admin/v1/clients/{client}/encoder does); false: the embedder's vectors")
	cmd.Flags().StringVar(&keep, "keep", "", "build the knowledge base in this new directory and keep it (for jervis search --data DIR); default: a temporary one, removed")
	return cmd
}

// freshDir returns an empty directory to build stores in: keep, made when
// missing and refused when it holds anything, or (keep "") a new
// temporary one that done removes.
func freshDir(keep, pattern string) (dir string, done func(), err error) {
	if keep == "" {
		tmp, err := os.MkdirTemp("", pattern)
		if err != nil {
			return "", nil, err
		}
		return tmp, func() { os.RemoveAll(tmp) }, nil
	}
	if err := refuseNonEmpty(keep); err != nil {
		return "", nil, err
	}
	return keep, func() {}, os.MkdirAll(keep, 0o750)
}

// refuseNonEmpty refuses a --keep directory that holds anything: a run
// builds on a fresh one.
func refuseNonEmpty(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("--keep %s: the directory is not empty (a run builds on a fresh one)", dir)
	}
	return nil
}

// eval imports paths into a fresh data directory, runs the indexers and
// the rules qualifier until the work is done, and measures the result.
func (a *app) eval(ctx context.Context, client, keep string, encoder bool, paths []string) (*eval.Report, error) {
	dir, done, err := freshDir(keep, "jervis-eval-")
	if err != nil {
		return nil, err
	}
	defer done()
	all, chunkStore, err := a.openMeasured(ctx, dir, client)
	if err != nil {
		return nil, err
	}
	defer all.Close()
	// The labels, read from the files in a pass of their own.
	truth := eval.NewTruth("Duplicate")
	for _, p := range paths {
		if importer.IsRepository(p) {
			err = truth.Repository(p, git.Unbundle)
		} else {
			err = filedrop.Walk(p, func(name string, r io.Reader, err error) error {
				if err == nil {
					err = truth.File(name, r)
				}
				if err != nil { // the import records it
					truth.Note(fmt.Sprintf("%s: %v", name, err))
				}
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	// What search is measured on is stripped before import.
	strip := func(name string, r io.Reader) io.Reader {
		if !strings.EqualFold(filepath.Ext(name), ".json") {
			return r
		}
		raw, err := io.ReadAll(io.LimitReader(r, pollers.MaxFileBytes+1))
		if err != nil {
			return r // the import records the read error
		}
		out, _ := eval.StripLinks(raw, truth.Strip...)
		return bytes.NewReader(out)
	}
	var cost eval.Cost
	start := time.Now()
	a.logf("eval: importing %s into client %s (data in %s)", strings.Join(paths, ", "), client, dir)
	im := &importer.Importer{Store: all.Store, Kinds: a.kinds, Client: client, Connection: "eval", DataDir: dir, Transform: strip}
	sum, err := a.importWith(ctx, all.Store, im, paths, false)
	if err != nil {
		return nil, err
	}
	cost.StoreSeconds = time.Since(start).Seconds()
	a.logf("eval: stored %d documents from %d files in %.1f s", sum.Documents, sum.Files, cost.StoreSeconds)
	indexed, qualified, err := a.drain(ctx, all.Store, all.KB)
	if err != nil {
		return nil, err
	}
	cost.IndexSeconds, cost.QualifySeconds = indexed.Seconds(), qualified.Seconds()
	cost.Seconds = time.Since(start).Seconds()
	cost.PeakRSSBytes = peakRSS()
	a.logf("eval: indexed in %.1f s, qualified in %.1f s (the two run together, as in serve)", cost.IndexSeconds, cost.QualifySeconds)
	if encoder {
		if err := a.trainAndReplay(ctx, all, client, &cost); err != nil {
			return nil, err
		}
	}
	a.logf("eval: measuring")
	return eval.Measure(ctx, eval.Env{Client: client, Store: all.Store, KB: all.KB.KB, Namespaces: a.kinds.Namespaces(), DataDir: dir,
		ChunkStore: chunkStore}, truth, cost)
}

// trainAndReplay trains the client's own encoder and replays its documents
// (a reprocess, as the encoder job does) until drained, so that every chunk has the
// encoder's vectors. A client with too few documents keeps the embedder's.
func (a *app) trainAndReplay(ctx context.Context, all *embedded.All, client string, cost *eval.Cost) error {
	start := time.Now()
	enc, err := all.KB.TrainEncoder(ctx, client, all.Store, kb.EncoderOptions{})
	if errors.Is(err, corpus.ErrTooFew) {
		a.logf("eval: no encoder: %v", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("train the client's encoder: %w", err)
	}
	cost.Encoder, cost.EncoderItems, cost.EncoderSeconds = enc.Name, enc.Items, time.Since(start).Seconds()
	a.logf("eval: trained the client's encoder %s on %d documents in %.1f s; replaying the documents with it", enc.Name, enc.Items, cost.EncoderSeconds)
	start = time.Now()
	if _, err := reprocess.Run(ctx, all.Store, all.KB.KB, reprocess.Request{Client: client}, nil); err != nil {
		return fmt.Errorf("replay with the encoder: %w", err)
	}
	if _, _, err := a.drain(ctx, all.Store, all.KB); err != nil {
		return err
	}
	cost.ReplaySeconds = time.Since(start).Seconds()
	a.logf("eval: replayed in %.1f s", cost.ReplaySeconds)
	return nil
}

// openMeasured opens the stores of a measured run (eval, bench) in the
// fresh directory dir: the chunks go to the configured chunk store
// (rag.backend) — the embedded one in dir, or Weaviate, where the client's
// tenant is emptied first —; the rest is always embedded. It returns what
// the chunk store is, in words.
func (a *app) openMeasured(ctx context.Context, dir, client string) (*embedded.All, string, error) {
	b := embedded.Backends{VectorLists: a.cfg.RAG.SQLite.VectorLists, Logger: a.log}
	chunkStore := "sqlite (embedded)"
	if b.VectorLists > 0 {
		chunkStore = fmt.Sprintf("sqlite (embedded, vector lists from %d chunks)", b.VectorLists)
	}
	if a.cfg.RAG.Backend == "weaviate" {
		w := a.cfg.RAG.Weaviate
		s, err := openWeaviate(w)
		if err != nil {
			return nil, "", err
		}
		if err := s.Ping(ctx); err != nil {
			s.Close()
			return nil, "", fmt.Errorf("rag.weaviate.url %s: %w", w.URL, err)
		}
		if err := s.For(client).Drop(ctx); err != nil {
			s.Close()
			return nil, "", fmt.Errorf("empty client %s in weaviate: %w", client, err)
		}
		b.Chunks, chunkStore = s, "weaviate "+w.URL+" class "+w.Class
	}
	all, err := embedded.OpenWith(ctx, dir, b)
	return all, chunkStore, err
}

// drainPoll is the longest drain waits between two reads of the backlog
// (nextRead: less as it shrinks). It was Stats, which
// counts every document and task: every 50 ms took a third of the CPU of a
// 3,000-message run, and every 500 ms 14 % of the CPU of a
// 100,000-document bench (thirty-third round); the backlog reads only what
// waits.
const drainPoll = 500 * time.Millisecond

// drain runs the indexers and the rules qualifier together, as serve does,
// until no document or task waits for them, with a progress line of what
// is left; it returns when the last document was indexed and when
// the last task was qualified, from its start.
func (a *app) drain(ctx context.Context, st store.Store, k *embedded.KB) (indexed, qualified time.Duration, err error) {
	return a.drainWhile(ctx, &store.Waking{Store: st}, k, nil)
}

// drainWhile is drain that also waits, when done is not nil, until done
// says so (documents still arriving). What is stored through st wakes the
// loops, as in serve.
func (a *app) drainWhile(ctx context.Context, st *store.Waking, k *embedded.KB, done func() bool) (indexed, qualified time.Duration, err error) {
	ix, err := a.indexers(st, qualifier.PolicyRecord, nil)
	if err != nil {
		return 0, 0, err
	}
	ids := qualifier.NewIdentityLoop(st, k.KB, a.log)
	q, err := qualifier.New(qualifier.Config{Store: st, KB: k.KB, Concurrency: a.cfg.Qualifier.Concurrency, Batch: a.cfg.Qualifier.Batch, UncertainLinks: qualifier.PolicyRecord, PossibleDuplicates: a.cfg.Qualifier.PossibleDuplicates,
		PollInterval: a.cfg.Indexers.PollInterval, ShutdownTimeout: a.cfg.ShutdownTimeout, Logger: a.log, OnIdentities: ids.Wake})
	if err != nil {
		return 0, 0, err
	}
	st.Documents, st.Tasks = ix, q
	start := time.Now()
	bar := a.progress(-1, "indexing and qualifying")
	err = runWhile(ctx, st, drainPoll, func(b store.Backlog) bool {
		docs, tasks := b.Documents.Total(), b.Tasks.Total()
		bar.Describe(fmt.Sprintf("indexing and qualifying: %d documents and %d tasks to go", docs, tasks))
		bar.Add(1)
		if docs == 0 && indexed == 0 {
			indexed = time.Since(start)
		}
		idle := docs+tasks == 0 && (done == nil || done())
		if idle {
			bar.Finish()
		}
		return idle
	}, ix, q, ids)
	if err == nil {
		// What the last documents said about people, resolved before the
		// drain is over.
		_, err = ids.Pass(ctx)
	}
	return indexed, time.Since(start), err
}

// logf writes a progress line to stderr (CI logs show where the time went).
func (a *app) logf(format string, args ...any) {
	fmt.Fprintf(a.stderr, format+"\n", args...)
}
