// Package indexers holds the continuous indexers: they claim NEW source
// documents, turn each into one DATA_PROCESSING task and one
// LINK_PROCESSING task per distinct link, and mark the document INDEXED.
//
// Indexers make no network calls: links are found (indexers/links) and
// described, never fetched. They run on the core worker loop, so a crash at
// any point is repaired when the document's lease expires; task IDs are
// deterministic, so redoing a document creates nothing twice. Call Wake after
// storing documents and an idle indexer starts at once.
package indexers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/indexers/links"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// Store is what the indexers need from the pipeline state.
type Store interface {
	store.Documents
	store.Tasks
}

// Config tunes the indexer loop.
type Config struct {
	Concurrency  int           // claims indexed at once (default 4)
	BatchSize    int           // documents per claim, their tasks enqueued together (default 64)
	LeaseFor     time.Duration // default 1m
	PollInterval time.Duration // idle claim period (default 1s)
	// ShutdownTimeout is how long running documents may finish on shutdown
	// before they are handed back (default 10s).
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// Observe is told how each document's indexing ended (metrics).
	Observe func(stage string, outcome worker.Outcome, took time.Duration)
	// Kinds say what each document is (its noun, its sender, the HTML it
	// was written in); default: the built-in kinds.
	Kinds *pollers.Registry
	// Links, when set, says which links are recorded with their document
	// (qualifier.LinkTriage): such a link's LINK_PROCESSING task is made
	// DONE and its document's DATA_PROCESSING task records it
	// (store.DataPayload.Recorded). Nil: every link's task is NEW.
	Links LinkTriage
}

// LinkTriage returns, for one client, whether a link is recorded with its
// document: no page to fetch, no model to ask.
type LinkTriage func(ctx context.Context, client string) (record func(url string) bool, err error)

// Indexer turns one document into its tasks. It is the worker.Handler of
// the indexer loop; New builds the loop.
type Indexer struct {
	tasks store.Tasks
	kinds *pollers.Registry
	links LinkTriage
}

var _ worker.BatchHandler[store.Document] = (*Indexer)(nil)

// New returns the indexer loop over st.
func New(st Store, cfg Config) (*worker.Worker[store.Document], error) {
	if cfg.Kinds == nil {
		cfg.Kinds = kinds.Default()
	}
	return worker.New(store.DocumentQueue{Documents: st}, &Indexer{tasks: st, kinds: cfg.Kinds, links: cfg.Links}, worker.Config{
		Name:            "indexer",
		Concurrency:     cmp.Or(cfg.Concurrency, 4),
		BatchSize:       cmp.Or(cfg.BatchSize, 64),
		BatchJobs:       cmp.Or(cfg.BatchSize, 64),
		LeaseFor:        cfg.LeaseFor,
		PollInterval:    cfg.PollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          cfg.Logger,
		Observe:         cfg.Observe,
	})
}

// Handle implements worker.Handler.
func (ix *Indexer) Handle(ctx context.Context, job worker.Job[store.Document]) (worker.Result, error) {
	tasks, err := ix.tasksOf(ctx, job.Item, ix.triage())
	if err != nil {
		return worker.Result{}, err
	}
	return worker.Result{}, ix.enqueue(ctx, job.Item, tasks)
}

// HandleBatch implements worker.BatchHandler: the documents' tasks are
// enqueued in one call (each document's alone when that fails, to find
// which).
func (ix *Indexer) HandleBatch(ctx context.Context, jobs []worker.Job[store.Document]) []worker.BatchResult {
	out := make([]worker.BatchResult, len(jobs))
	tasks := make([][]store.Task, len(jobs))
	var all []store.Task
	triage := ix.triage()
	for i, j := range jobs {
		tasks[i], out[i].Err = ix.tasksOf(ctx, j.Item, triage)
		all = append(all, tasks[i]...)
	}
	if _, err := ix.tasks.EnqueueTasks(ctx, all...); err != nil {
		for i, j := range jobs {
			if out[i].Err == nil {
				out[i].Err = ix.enqueue(ctx, j.Item, tasks[i])
			}
		}
	}
	return out
}

// enqueue enqueues a document's tasks. Enqueueing is idempotent: a redo
// after a crash adds nothing.
func (ix *Indexer) enqueue(ctx context.Context, doc store.Document, tasks []store.Task) error {
	if _, err := ix.tasks.EnqueueTasks(ctx, tasks...); err != nil {
		return fmt.Errorf("document %s: enqueue tasks: %w", doc.ID, err)
	}
	return nil
}

// triage returns Config.Links read once per client (the client's link
// patterns), for one batch; nil without Config.Links.
func (ix *Indexer) triage() LinkTriage {
	if ix.links == nil {
		return nil
	}
	read := map[string]func(string) bool{}
	return func(ctx context.Context, client string) (func(string) bool, error) {
		if f, ok := read[client]; ok {
			return f, nil
		}
		f, err := ix.links(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("client %s: link policy: %w", client, err)
		}
		read[client] = f
		return f, nil
	}
}

// tasksOf returns the document's tasks: its DATA_PROCESSING task and a
// LINK_PROCESSING task per distinct link, made DONE when triage says the
// link is recorded with its document (then the DATA_PROCESSING task's
// payload carries it).
func (ix *Indexer) tasksOf(ctx context.Context, doc store.Document, triage LinkTriage) ([]store.Task, error) {
	n := doc.Normalized
	if reason, ok := n.Metadata[store.MetaParseError].(string); ok {
		return nil, worker.Malformed(fmt.Errorf("%s %s: %s", doc.SourceType, doc.ExternalID, reason))
	}
	kind := ix.kinds.Kind(doc.SourceType)
	var shape pollers.Shape // its HTML and Sender, where the kind's may have them
	if kind.About().LinkSources {
		shape = kind.Shape(doc)
	}
	found := links.FromText(n.Body)
	if shape.HTML != "" {
		found = links.Merge(found, links.FromHTML(shape.HTML))
	}
	var given []links.Link
	for _, l := range n.Links {
		if u, ok := links.Normalize(l.URL); ok {
			given = append(given, links.Link{URL: u, Context: l.Context})
		}
	}
	found = links.Merge(given, found)

	title := cmp.Or(n.Title, doc.ExternalID)
	data := store.DataPayload{SourceType: doc.SourceType, ExternalID: doc.ExternalID, Version: doc.Version, Title: n.Title, Summary: summary(kind.About().Noun, doc, found)}
	var record func(string) bool
	if triage != nil && len(found) > 0 {
		var err error
		if record, err = triage(ctx, doc.Client); err != nil {
			return nil, err
		}
	}
	tasks := make([]store.Task, 1, 1+len(found)) // the DATA_PROCESSING task first, its payload last
	for _, l := range found {
		data.Links = append(data.Links, l.URL)
		p, err := json.Marshal(store.LinkPayload{URL: l.URL, SourceDoc: doc.ID, SourceType: doc.SourceType, Title: title, From: shape.Sender, Context: l.Context})
		if err != nil {
			return nil, worker.Permanent(fmt.Errorf("document %s: link payload: %w", doc.ID, err))
		}
		t := store.Task{ID: store.TaskID(doc.ID, store.KindLink, l.URL), Kind: store.KindLink, Client: doc.Client, SourceDoc: doc.ID, Payload: p, CorrelationID: doc.ID, Priority: doc.Priority}
		if record != nil && record(l.URL) {
			t.State = store.TaskDone
			data.Recorded = append(data.Recorded, store.RecordedLink{Task: t.ID, URL: l.URL, Context: l.Context})
		}
		tasks = append(tasks, t)
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return nil, worker.Permanent(fmt.Errorf("document %s: data payload: %w", doc.ID, err))
	}
	tasks[0] = store.Task{Kind: store.KindData, Client: doc.Client, SourceDoc: doc.ID, Payload: payload, CorrelationID: doc.ID, Priority: doc.Priority}
	return tasks, nil
}

// summary says in one line what the document is and which links it has.
func summary(noun string, doc store.Document, found []links.Link) string {
	s := fmt.Sprintf("this %s (%s, version %d)", noun, doc.ExternalID, doc.Version)
	switch len(found) {
	case 0:
		return s + " contains no links"
	case 1:
		return s + " contains 1 link: " + found[0].URL
	}
	urls := make([]string, 0, 5)
	for _, l := range found[:min(5, len(found))] {
		urls = append(urls, l.URL)
	}
	more := ""
	if len(found) > 5 {
		more = fmt.Sprintf(" and %d more", len(found)-5)
	}
	return fmt.Sprintf("%s contains %d links: %s%s", s, len(found), strings.Join(urls, ", "), more)
}
