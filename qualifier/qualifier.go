// Package qualifier runs the qualification loop: it claims DATA_PROCESSING
// and LINK_PROCESSING tasks and builds the knowledge base from them.
//
// A DATA_PROCESSING task's document is structured deterministically
// (qualifier/rules: metadata edges, relationship syntax, mentions), ingested
// (kb.Ingest: every edge with its evidence), routed by rules — DONE, or
// READY_FOR_GPU when it asks something of the configured users — and given
// its TaskMemory. A LINK_PROCESSING task is classified and recorded, and
// fetched when it is safe (qualifier/linksafety). With an Ollama model
// configured, qualifier/agent adds entities and relations from prose and
// makes the routing decision; its usage is recorded on the task.
//
// Every step is idempotent — ingest is, TaskMemory is replaced — so a task
// redone after a crash changes nothing twice.
package qualifier

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/urgency"
	"github.com/jervis-dev/jervis/internal/worker"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier/agent"
	"github.com/jervis-dev/jervis/qualifier/linksafety"
	"github.com/jervis-dev/jervis/qualifier/rules"
)

// Store is what the qualifier needs from the pipeline state.
type Store interface {
	store.Documents
	store.Tasks
	store.Memories
	store.LinkPatterns
	store.Identities
	GetClient(ctx context.Context, id string) (store.Client, error)
}

// Policies for links no pattern classifies.
const (
	PolicyRecord = "record" // record the link, do not fetch it (default)
	PolicyFetch  = "fetch"  // fetch it like a SAFE one
	PolicyModel  = "model"  // the agent's model decides (needs Agent)
	PolicyAuto   = "auto"   // PolicyModel when an Agent is set, else PolicyRecord
)

// Config tunes the qualification loop.
type Config struct {
	Store Store
	KB    *kb.KB
	// Kinds say what each document means (its shape); default: the
	// built-in kinds.
	Kinds   *pollers.Registry
	Users   []string // whose requests route to READY_FOR_GPU; empty: anyone's
	Fetcher *linksafety.Fetcher
	// Agent, when set, adds what structure cannot (qualifier/agent) and
	// makes the routing decision; without it the rules decide.
	Agent          *agent.Agent
	UncertainLinks string // PolicyAuto (default), PolicyRecord, PolicyFetch or PolicyModel
	Concurrency    int    // tasks at once, or batches with Batch above 1 (default DefaultConcurrency)
	// Batch is how many tasks are handled together (HandleBatch): their
	// documents ingested with one write per store (kb.IngestBatch), their
	// TaskMemory and identity facts in one; 1: each alone. Default
	// DefaultBatch. With an Agent, always 1. While tasks wait in numbers
	// (a claim came back full), batches grow, doubling, to BatchGrowth
	// times Batch (at most MaxBatch).
	Batch int
	// PossibleDuplicates, above 0, is the similarity from which an item of
	// a kind whose items can duplicate one another (pollers.About.Duplicates)
	// is joined to a like item of its source type by a possible_duplicate
	// edge (kb.PossibleDuplicates); 0: none.
	PossibleDuplicates float64
	// LeaseFor is how long a claim holds a task (default 1m): a crashed
	// process's tasks return to the queue after it.
	LeaseFor        time.Duration
	BackoffBase     time.Duration // first retry delay (default 1s)
	PollInterval    time.Duration
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// OnIdentities is told when a document's identity facts were recorded
	// (IdentityLoop.Wake).
	OnIdentities func()
	// Observe is told how each task's qualification ended (metrics).
	Observe func(stage string, outcome worker.Outcome, took time.Duration)
}

// DefaultBatch is how many tasks the rules qualifier takes together by
// default.
const DefaultBatch = 16

// DefaultConcurrency is how many batches (tasks, with an Agent) run at
// once by default. Three, not four, since SQLite's connections stopped
// waiting for each other's mutexes (BENCHMARKS.md, forty-ninth round): on
// two cores a fourth batch only added goroutines waiting for a processor —
// Jira 948–1,018 → 991–1,064 documents/s in four alternating pairs, the
// list's median of seven 873 → 932, 100,000 synthetic 884 → 913, a live
// note's freshness the same.
const DefaultConcurrency = 3

// Qualifier is the worker.Handler of the qualification loop.
type Qualifier struct {
	cfg Config
	// maxWrite is the most requests one kb.IngestBatch writes while
	// live documents come (ingest): as many as two batches have tasks.
	maxWrite int
}

var _ worker.BatchHandler[store.Task] = (*Qualifier)(nil)

// New returns the qualification loop.
func New(cfg Config) (*worker.Worker[store.Task], error) {
	if cfg.Store == nil || cfg.KB == nil {
		return nil, errors.New("qualifier: store and knowledge base are required")
	}
	if cfg.Fetcher == nil {
		cfg.Fetcher = &linksafety.Fetcher{}
	}
	if cfg.Kinds == nil {
		cfg.Kinds = kinds.Default()
	}
	var err error
	if cfg.UncertainLinks, err = linkPolicy(cfg.UncertainLinks, cfg.Agent != nil); err != nil {
		return nil, err
	}
	batch := cmp.Or(cfg.Batch, DefaultBatch)
	if cfg.Agent != nil {
		batch = 1 // the model's calls are the cost, one task at a time
	}
	return worker.New(store.TaskQueue{Tasks: cfg.Store, Stage: store.StageQualify}, &Qualifier{cfg: cfg, maxWrite: min(2*batch, grown(batch))}, worker.Config{
		Name: "qualifier", Concurrency: cmp.Or(cfg.Concurrency, DefaultConcurrency), BatchJobs: batch, MaxBatchJobs: grown(batch), LeaseFor: cfg.LeaseFor, BackoffBase: cfg.BackoffBase, PollInterval: cfg.PollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger, Observe: cfg.Observe,
	})
}

// linkPolicy is the uncertain-link policy p (Config.UncertainLinks) as it
// applies, model saying whether there is a model: PolicyAuto resolved.
func linkPolicy(p string, model bool) (string, error) {
	switch p = cmp.Or(p, PolicyAuto); p {
	case PolicyAuto:
		if model {
			return PolicyModel, nil
		}
		return PolicyRecord, nil
	case PolicyRecord, PolicyFetch:
		return p, nil
	case PolicyModel:
		if !model {
			return "", errors.New("qualifier: uncertain-link policy model needs a qualifier model")
		}
		return p, nil
	}
	return "", fmt.Errorf("qualifier: uncertain-link policy %q is not %s, %s, %s or %s", p, PolicyAuto, PolicyRecord, PolicyFetch, PolicyModel)
}

// LinkTriage is the link policy as the indexers apply it
// (indexers.Config.Links). A link the qualifier would record and not
// fetch — neither SAFE, nor UNCERTAIN under PolicyFetch or PolicyModel —
// is recorded by its document's DATA_PROCESSING task, and its own
// LINK_PROCESSING task is made DONE, never claimed: a task's life in the
// queue costs more than the record (BENCHMARKS.md). uncertain is
// Config.UncertainLinks, model whether the qualifier has a model.
func LinkTriage(st store.LinkPatterns, uncertain string, model bool) (func(ctx context.Context, client string) (record func(url string) bool, err error), error) {
	policy, err := linkPolicy(uncertain, model)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, client string) (func(string) bool, error) {
		patterns, err := st.ListLinkPatterns(ctx, client)
		if err != nil {
			return nil, err
		}
		return func(url string) bool {
			verdict, _ := linksafety.Classify(url, patterns)
			return !fetchedOrAsked(verdict, policy)
		}, nil
	}, nil
}

// fetchedOrAsked reports whether a link of verdict is fetched, or its
// fetch decided by the model, under the uncertain-link policy.
func fetchedOrAsked(verdict linksafety.Verdict, policy string) bool {
	return verdict == linksafety.Safe || verdict == linksafety.Uncertain && policy != PolicyRecord
}

// BatchGrowth and MaxBatch bound how far a backlog grows the qualifier's
// batches (Config.Batch). Larger batches write each page their rows share
// once: on the dev corpora 64 gave 10–16 % more documents/s than 16, and
// 128 (8 × 16) 4–6 % more than 64 (forty-third round: Jira 711 → 735,
// the list 585 → 612, 100,000 synthetic documents 580 → 614). A live
// document then waits for a larger bulk write in flight (Qualifier.ingest
// cuts the writes while live ones come; at 128 a live note's freshness
// p50 was 71–97 ms against 60–71 at 64, its p99 178–208 against 146–225:
// BENCHMARKS.md), which is why batches are small while the queue is.
const (
	BatchGrowth = 8
	MaxBatch    = 256
)

// grown is how large a backlog makes batches of batch tasks.
func grown(batch int) int {
	if batch <= 1 {
		return batch // each alone, always
	}
	return max(batch, min(BatchGrowth*batch, MaxBatch))
}

// ClassEmptyExtraction is the class of tasks whose model answered without
// using any tool: retried, then FAILED with that reason.
const ClassEmptyExtraction = "empty_extraction"

// plan is one task's qualification made ready for its ingest: the request,
// what an ingest error means for the task, and what follows the ingest.
type plan struct {
	req kb.IngestRequest
	// links are the links a DATA_PROCESSING task records with its
	// document (store.DataPayload.Recorded), ingested beside req; back
	// the tasks of those it sends back to be run on their own.
	links []recorded
	back  []string
	// apart: the task is run on its own (run), beside a batch, never in
	// its sequence: it fetches a page.
	apart  bool
	failed func(error) error
	finish func(context.Context, kb.IngestResult) (finished, error)
}

// recorded is a link recorded with its document: what it ingests, and its
// LINK_PROCESSING task's TaskMemory but for what the ingest wrote.
type recorded struct {
	url string
	req kb.IngestRequest
	mem store.TaskMemory
}

// requests are what p ingests: its task's request, then its links'.
func (p *plan) requests() []kb.IngestRequest {
	reqs := make([]kb.IngestRequest, 0, 1+len(p.links))
	reqs = append(reqs, p.req)
	for _, l := range p.links {
		reqs = append(reqs, l.req)
	}
	return reqs
}

// settle finishes p once its requests were ingested (res and errs in the
// order of requests). A link the knowledge base refuses (a validation
// error) is left out with a warning on the task; any other error fails
// the task, to be retried whole.
func (p *plan) settle(ctx context.Context, res []kb.IngestResult, errs []error) (finished, error) {
	if errs[0] != nil {
		return finished{}, p.failed(errs[0])
	}
	main := res[0]
	mems := make([]store.TaskMemory, len(p.links))
	for i, l := range p.links {
		mems[i] = l.mem
		switch err := errs[1+i]; {
		case err == nil:
			r := res[1+i]
			mems[i].GraphNodeKeys, mems[i].RAGDocumentIDs, mems[i].Warnings = r.Nodes, r.Chunks, r.Warnings
		case isMalformed(err):
			mems[i].RoutingReason = fmt.Sprintf("not recorded: %v", err)
			main.Warnings = append(main.Warnings, fmt.Sprintf("link %s not recorded: %v", l.url, err))
		default:
			return finished{}, fmt.Errorf("link %s: %w", l.url, err)
		}
	}
	f, err := p.finish(ctx, main)
	f.links, f.back = mems, p.back
	return f, err
}

// finished is what a task leaves once its knowledge is written: its
// TaskMemory (and its recorded links' tasks'), the identity facts its
// document states, its outcome.
type finished struct {
	mem    store.TaskMemory
	links  []store.TaskMemory
	back   []string // recorded links' tasks sent back to NEW
	facts  *store.IdentityFactSet
	result worker.Result
}

// lookups reads what plans need per client, once per batch.
type lookups struct {
	q          *Qualifier
	namespaces map[string][]string
	patterns   map[string][]store.LinkPattern
	documents  map[[2]string]store.Document // a document's link tasks come with its data task
	shapes     map[[2]string]pollers.Shape  // and each needs its main node
}

func (q *Qualifier) lookups() *lookups {
	return &lookups{q: q, namespaces: map[string][]string{}, patterns: map[string][]store.LinkPattern{},
		documents: map[[2]string]store.Document{}, shapes: map[[2]string]pollers.Shape{}}
}

// shape is doc's shape (its kind's reading of its metadata: a JSON
// decoding, which each of a Jira issue's link tasks repeated).
func (l *lookups) shape(doc store.Document) pollers.Shape {
	s, _ := remember(l.shapes, [2]string{doc.Client, doc.ID}, func() (pollers.Shape, error) { return l.q.cfg.Kinds.Shape(doc), nil })
	return s
}

// prefetch reads the documents of jobs' tasks, a read a client (one
// each was a read; MongoDB: a round trip). What it cannot read is read
// again, and its error reported, by the task that needs it.
func (l *lookups) prefetch(ctx context.Context, jobs []worker.Job[store.Task]) {
	ids := map[string][]string{}
	for _, j := range jobs {
		ids[j.Item.Client] = append(ids[j.Item.Client], j.Item.SourceDoc)
	}
	for client, want := range ids {
		if len(want) < 2 {
			continue // as cheap alone
		}
		docs, err := l.q.cfg.Store.GetDocuments(ctx, client, want)
		if err != nil {
			continue
		}
		for _, d := range docs {
			l.documents[[2]string{client, d.ID}] = d
		}
	}
}

func (l *lookups) document(ctx context.Context, client, id string) (store.Document, error) {
	return remember(l.documents, [2]string{client, id}, func() (store.Document, error) { return l.q.cfg.Store.GetDocument(ctx, client, id) })
}

func (l *lookups) mentionNamespaces(ctx context.Context, client string) ([]string, error) {
	return remember(l.namespaces, client, func() ([]string, error) { return l.q.mentionNamespaces(ctx, client) })
}

func (l *lookups) linkPatterns(ctx context.Context, client string) ([]store.LinkPattern, error) {
	return remember(l.patterns, client, func() ([]store.LinkPattern, error) { return l.q.cfg.Store.ListLinkPatterns(ctx, client) })
}

// remember returns m[k], read by get the first time (an error is not kept).
func remember[K comparable, V any](m map[K]V, k K, get func() (V, error)) (V, error) {
	if v, ok := m[k]; ok {
		return v, nil
	}
	v, err := get()
	if err == nil {
		m[k] = v
	}
	return v, err
}

// Handle implements worker.Handler.
func (q *Qualifier) Handle(ctx context.Context, job worker.Job[store.Task]) (worker.Result, error) {
	p, err := q.plan(ctx, job.Item, q.lookups())
	if err != nil {
		return worker.Result{}, err
	}
	return q.run(ctx, p)
}

// run qualifies one planned task on its own: ingest (with its recorded
// links), finish, save.
func (q *Qualifier) run(ctx context.Context, p *plan) (worker.Result, error) {
	res, errs := q.cfg.KB.IngestBatch(ctx, p.requests())
	f, err := p.settle(ctx, res, errs)
	if err != nil {
		return worker.Result{}, err
	}
	if err := q.save(ctx, []finished{f}); err != nil {
		return worker.Result{}, err
	}
	return f.result, nil
}

// HandleBatch implements worker.BatchHandler: the tasks' documents are
// ingested together (kb.IngestBatch) and their TaskMemory and identity
// facts written together; a task that fetches a page is handled on its
// own, beside the batch. Each task's outcome is its own.
func (q *Qualifier) HandleBatch(ctx context.Context, jobs []worker.Job[store.Task]) []worker.BatchResult {
	out := make([]worker.BatchResult, len(jobs))
	var apart sync.WaitGroup
	defer apart.Wait()
	l := q.lookups()
	l.prefetch(ctx, jobs)
	plans := make([]*plan, 0, len(jobs))
	at := make([]int, 0, len(jobs)) // plans[i] is jobs[at[i]]'s
	for i, j := range jobs {
		p, err := q.plan(ctx, j.Item, l)
		switch {
		case err != nil:
			out[i].Err = err
		case p.apart:
			apart.Go(func() { out[i].Result, out[i].Err = q.run(ctx, p) })
		default:
			plans, at = append(plans, p), append(at, i)
		}
	}
	var reqs []kb.IngestRequest
	from := make([]int, len(plans)) // plans[n]'s requests start at reqs[from[n]]
	for n, p := range plans {
		from[n] = len(reqs)
		reqs = append(reqs, p.requests()...)
	}
	results, errs := q.ingest(ctx, reqs, from)
	var fs []finished
	var fat []int // fs[n] is jobs[fat[n]]'s
	for n, p := range plans {
		i, to := at[n], from[n]+1+len(p.links)
		f, err := p.settle(ctx, results[from[n]:to], errs[from[n]:to])
		if err != nil {
			out[i].Err = err
			continue
		}
		fs, fat = append(fs, f), append(fat, i)
	}
	if err := q.save(ctx, fs); err != nil {
		for n, f := range fs { // find which: each alone
			out[fat[n]].Err = q.save(ctx, []finished{f})
		}
	}
	for n, f := range fs {
		if out[fat[n]].Err == nil {
			out[fat[n]].Result = f.result
		}
	}
	return out
}

// ingest ingests a batch's requests (plans' requests, the plans' starting
// at from): in one write, or, while live documents come (urgent work
// within urgency.Window), in writes of at most maxWrite requests, a plan's own
// never cut. A data task carries its recorded links, so a batch asks for
// more requests than it has tasks, and a live document's writes wait for
// the bulk write in flight. On Jira (BENCHMARKS.md) writes of 32 requests
// instead of a whole grown batch's (64 tasks, about 200 requests) took a
// live note's freshness p50 from 172–225 ms back to 134–156, and the bulk
// alone from 314 to 259–280 documents/s: hence only while live ones come.
func (q *Qualifier) ingest(ctx context.Context, reqs []kb.IngestRequest, from []int) ([]kb.IngestResult, []error) {
	if !urgency.Recent(urgency.Window) {
		return q.cfg.KB.IngestBatch(ctx, reqs)
	}
	results, errs := make([]kb.IngestResult, 0, len(reqs)), make([]error, 0, len(reqs))
	write := func(start, end int) {
		r, e := q.cfg.KB.IngestBatch(ctx, reqs[start:end])
		results, errs = append(results, r...), append(errs, e...)
	}
	start := 0
	for n := range from {
		end := len(reqs)
		if n+1 < len(from) {
			end = from[n+1]
		}
		if end-start > q.maxWrite && from[n] > start {
			write(start, from[n])
			start = from[n]
		}
	}
	if start < len(reqs) {
		write(start, len(reqs))
	}
	return results, errs
}

// save writes what finished tasks leave: the recorded links' tasks sent
// back, identity facts, then TaskMemory.
func (q *Qualifier) save(ctx context.Context, fs []finished) error {
	var sets []store.IdentityFactSet
	var mems []store.TaskMemory
	var back []store.TaskTransition
	said := false
	for _, f := range fs {
		for _, id := range f.back {
			back = append(back, store.TaskTransition{ID: id, From: store.TaskDone, To: store.TaskNew, ResetAttempts: true, Reason: "link policy: the link is now fetched or asked about"})
		}
		if f.facts != nil {
			sets = append(sets, *f.facts)
			said = said || len(f.facts.Facts) > 0
		}
		mems = append(mems, f.mem)
		mems = append(mems, f.links...)
	}
	// One already sent back (a redo) is a conflict: nothing to do.
	if len(back) > 0 {
		if err := q.cfg.Store.TransitionTasks(ctx, back); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("links sent back: %w", err)
		}
	}
	if len(sets) > 0 {
		if err := q.cfg.Store.PutIdentityFactSets(ctx, sets); err != nil {
			return fmt.Errorf("identity facts: %w", err)
		}
		if said && q.cfg.OnIdentities != nil {
			q.cfg.OnIdentities()
		}
	}
	// In parts while live documents come, as ingest writes.
	part := len(mems)
	if urgency.Recent(urgency.Window) {
		part = q.maxWrite
	}
	for len(mems) > 0 {
		n := min(part, len(mems))
		if err := q.cfg.Store.SaveTaskMemories(ctx, mems[:n]); err != nil {
			return fmt.Errorf("task memory: %w", err)
		}
		mems = mems[n:]
	}
	return nil
}

// plan reads task t's document and makes its qualification ready.
func (q *Qualifier) plan(ctx context.Context, t store.Task, l *lookups) (*plan, error) {
	doc, err := l.document(ctx, t.Client, t.SourceDoc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, worker.Permanent(fmt.Errorf("task %s: source document %s is gone", t.ID, t.SourceDoc))
	}
	if err != nil {
		return nil, err
	}
	namespaces, err := l.mentionNamespaces(ctx, t.Client)
	if err != nil {
		return nil, err
	}
	if t.Kind == store.KindLink {
		return q.planLink(ctx, t, doc, namespaces, l)
	}
	var data store.DataPayload
	if err := json.Unmarshal(t.Payload, &data); len(t.Payload) > 0 && err != nil {
		return nil, worker.Permanent(fmt.Errorf("task %s: data payload: %v", t.ID, err))
	}
	shape := l.shape(doc)
	structure := rules.Structure(shape, doc)
	structure.MentionNamespaces = namespaces
	var links []recorded
	var back []string
	if len(data.Recorded) > 0 {
		patterns, err := l.linkPatterns(ctx, t.Client)
		if err != nil {
			return nil, err
		}
		for _, r := range data.Recorded {
			verdict, why := linksafety.Classify(r.URL, patterns)
			if fetchedOrAsked(verdict, q.cfg.UncertainLinks) { // the policy changed since: the link's own task
				back = append(back, r.Task)
				continue
			}
			req, evidence := linkRecord(r.Task, doc, shape.Main, r.URL, doc.Normalized.Title, r.Context, verdict, namespaces)
			links = append(links, recorded{url: r.URL, req: req, mem: linkMemory(r.Task, t, doc, evidence, fmt.Sprintf("%s (%s): recorded with its document, not fetched", verdict, why))})
		}
	}
	return &plan{
		req:   structure,
		links: links,
		back:  back,
		failed: func(err error) error {
			if isMalformed(err) {
				return worker.Malformed(fmt.Errorf("document %s: %w", doc.ExternalID, err))
			}
			return fmt.Errorf("ingest %s: %w", doc.ExternalID, err)
		},
		finish: func(ctx context.Context, res kb.IngestResult) (finished, error) {
			return q.finishData(ctx, t, doc, shape, structure, res)
		},
	}, nil
}

// finishData routes a DATA_PROCESSING task whose document was ingested:
// its identity facts, possible duplicates, the agent's additions when
// there is one, its TaskMemory.
func (q *Qualifier) finishData(ctx context.Context, t store.Task, doc store.Document, shape pollers.Shape, structure kb.IngestRequest, res kb.IngestResult) (finished, error) {
	var f finished
	if source, facts := IdentityFacts(shape, doc, append(slices.Clone(res.Nodes), res.Aliased...)); source != "" {
		f.facts = &store.IdentityFactSet{Client: doc.Client, Source: source, Facts: facts}
	}
	if err := q.possibleDuplicates(ctx, doc, structure, &res); err != nil {
		return f, err
	}
	read := rules.Read(shape, doc, q.cfg.Users)
	decision, reason, asks, summary := read.Decision, read.Reason, read.Asks, read.Summary
	var usage []byte
	if q.cfg.Agent != nil {
		out, err := q.cfg.Agent.Qualify(ctx, agent.Input{TaskID: t.ID, Client: t.Client, Document: doc, MainNode: res.MainNode,
			Content: structure.Content, Summary: summary, Decision: decision, Reason: reason})
		usage, _ = json.Marshal(out.Usage)
		if errors.Is(err, agent.ErrEmptyExtraction) {
			return f, worker.Classify(ClassEmptyExtraction, false, true, fmt.Errorf("document %s: %w", doc.ExternalID, err))
		}
		if err != nil {
			return f, err
		}
		decision, reason, summary = out.Decision, out.Reason, out.Summary
		res.Nodes, res.Chunks = append(res.Nodes, out.Nodes...), append(res.Chunks, out.Chunks...)
	}
	structured, _ := json.Marshal(map[string]any{"title": doc.Normalized.Title, "metadata": compact(doc.Normalized.Metadata)})
	f.mem = store.TaskMemory{
		TaskID: t.ID, CorrelationID: t.CorrelationID, Client: t.Client, ContextSummary: summary,
		GraphNodeKeys: res.Nodes, RAGDocumentIDs: res.Chunks, StructuredData: structured,
		RoutingDecision: store.TaskState(decision), RoutingReason: reason, SourceType: doc.SourceType, SourceID: doc.ID,
		Warnings: res.Warnings, MainNode: res.MainNode, Asks: &asks,
	}
	f.result = worker.Result{Next: decision, Usage: usage}
	return f, nil
}

// IdentityFacts are what a document says about who its people are (its
// kind's Shape.Identities) and which file a bare file name it mentions is
// (nodes: the node keys its ingest wrote and the refs it named that were
// aliases: the same facts whatever was resolved before), as recorded: refs normalised as
// Ingest does, seen when the document was, said by source (its main
// node's ref, "" for a shape without one). A fact whose ref cannot name a
// node is left out.
func IdentityFacts(shape pollers.Shape, doc store.Document, nodes []string) (source string, facts []store.IdentityFact) {
	main, err := kb.ParseRef(shape.Main)
	if err != nil {
		return "", nil
	}
	facts = make([]store.IdentityFact, 0, len(shape.Identities))
	for _, f := range shape.Identities {
		ref, err := kb.ParseRef(f.Ref)
		if err != nil {
			continue
		}
		f.Ref, f.Seen = ref.String(), doc.ObservedAt
		facts = append(facts, f)
	}
	for _, n := range nodes {
		if name, ok := strings.CutPrefix(n, "file:"); ok && !strings.Contains(name, "/") {
			facts = append(facts, store.IdentityFact{Ref: n, Kind: store.FactFileName, Value: name, Evidence: "file " + name + " named in " + main.String(), Seen: doc.ObservedAt})
		}
	}
	return main.String(), facts
}

// possibleDuplicates joins the document's item to the items of its source
// type alike enough (Config.PossibleDuplicates), when its kind's items can
// duplicate one another.
func (q *Qualifier) possibleDuplicates(ctx context.Context, doc store.Document, req kb.IngestRequest, res *kb.IngestResult) error {
	if q.cfg.PossibleDuplicates <= 0 || !q.cfg.Kinds.Kind(doc.SourceType).About().Duplicates {
		return nil
	}
	// No user waits on it: a search that would cost more CPU to return
	// sooner does not (rag.InBackground).
	sim, err := q.cfg.KB.Similar(rag.InBackground(ctx), kb.SimilarRequest{Client: doc.Client, SourceURN: req.SourceURN, Title: req.Title, Text: req.Content,
		Limit: kb.DuplicateCandidates, Filter: rag.Filter{SourceTypes: []string{string(doc.SourceType)}}})
	if errors.Is(err, kb.ErrNotIndexed) {
		return nil // nothing of it was indexed (a body of whitespace)
	}
	if err != nil {
		return fmt.Errorf("similar items: %w", err)
	}
	keys, err := q.cfg.KB.PossibleDuplicates(ctx, doc.Client, sim, q.cfg.PossibleDuplicates)
	res.Edges = append(res.Edges, keys...)
	return err
}

// planLink makes a LINK_PROCESSING task ready: the link is classified
// (qualifier/linksafety) and recorded — a link node, found_in its source
// document, with the text around it as evidence — and a SAFE one (or an
// UNCERTAIN one under PolicyFetch, or that the model chose under
// PolicyModel) is fetched by the guarded client once recorded, and its
// page ingested as the link node's content. A fetched page's own links are
// in its text; they are never queued.
func (q *Qualifier) planLink(ctx context.Context, t store.Task, doc store.Document, namespaces []string, l *lookups) (*plan, error) {
	var p store.LinkPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.URL == "" {
		return nil, worker.Permanent(fmt.Errorf("task %s: link payload: %v", t.ID, err))
	}
	linkRef := kb.BoundedRef("link", p.URL)
	patterns, err := l.linkPatterns(ctx, t.Client)
	if err != nil {
		return nil, err
	}
	verdict, why := linksafety.Classify(p.URL, patterns)
	fetch := verdict == linksafety.Safe || verdict == linksafety.Uncertain && q.cfg.UncertainLinks == PolicyFetch
	var usage []byte
	if verdict == linksafety.Uncertain && q.cfg.UncertainLinks == PolicyModel {
		d, err := q.cfg.Agent.DecideLink(ctx, p.URL, p.Context)
		usage, _ = json.Marshal(d.Usage)
		if err != nil {
			return nil, err // retried with backoff, then FAILED with the reason
		}
		fetch, why = d.Fetch, why+"; "+d.Reason
	}
	req, evidence := linkRecord(t.ID, doc, l.shape(doc).Main, p.URL, p.Title, p.Context, verdict, namespaces)
	return &plan{
		apart: fetch,
		req:   req,
		failed: func(err error) error {
			if isMalformed(err) {
				return worker.Malformed(fmt.Errorf("link %s: %w", p.URL, err))
			}
			return err
		},
		finish: func(ctx context.Context, res kb.IngestResult) (finished, error) {
			reason := fmt.Sprintf("%s (%s): recorded, not fetched", verdict, why)
			if fetch {
				var err error
				if reason, err = q.fetchLink(ctx, t, p.URL, linkRef, verdict, why, namespaces, &res); err != nil {
					return finished{}, err
				}
			}
			mem := linkMemory(t.ID, t, doc, evidence, reason)
			mem.GraphNodeKeys, mem.RAGDocumentIDs, mem.Warnings = res.Nodes, res.Chunks, res.Warnings
			return finished{mem: mem, result: worker.Result{Next: rules.Done, Usage: usage}}, nil
		},
	}, nil
}

// linkRecord is what records a link of doc (its task's ID task, its
// document's main node main, found in the item titled title): a link node
// found_in the main node, with the text around the link as its evidence
// (returned too: the task's context summary).
func linkRecord(task string, doc store.Document, main, url, title, context string, verdict linksafety.Verdict, namespaces []string) (kb.IngestRequest, string) {
	linkRef := kb.BoundedRef("link", url)
	evidence := "Link " + url + " found in " + cmp.Or(title, doc.ExternalID)
	if context != "" {
		evidence += ":\n\n" + context
	}
	return kb.IngestRequest{
		Client: doc.Client, MainNode: linkRef, Props: map[string]any{"url": url, "verdict": string(verdict)},
		Content: evidence, Relations: []kb.MetaRelation{{From: linkRef, Type: "found_in", To: main}},
		SourceURN: "link:" + task, SourceType: string(doc.SourceType), Kind: kb.KindLink, ObservedAt: doc.ObservedAt,
		MentionNamespaces: namespaces,
	}, evidence
}

// linkMemory is the TaskMemory of the link task task of doc, made by or
// with t, but for what its ingest wrote.
func linkMemory(task string, t store.Task, doc store.Document, evidence, reason string) store.TaskMemory {
	return store.TaskMemory{TaskID: task, CorrelationID: t.CorrelationID, Client: t.Client, ContextSummary: evidence,
		RoutingDecision: store.TaskDone, RoutingReason: reason, SourceType: doc.SourceType, SourceID: doc.ID}
}

// fetchLink fetches a recorded link's page, unless it was already, and
// ingests it as the link node's content (its chunks added to res); it
// returns the routing reason.
func (q *Qualifier) fetchLink(ctx context.Context, t store.Task, url, linkRef string, verdict linksafety.Verdict, why string, namespaces []string, res *kb.IngestResult) (string, error) {
	pageURN := "page:" + url
	done, err := q.cfg.KB.Indexed(ctx, t.Client, pageURN)
	switch {
	case err != nil:
		return "", err
	case done:
		return fmt.Sprintf("%s (%s): already fetched and indexed", verdict, why), nil
	}
	page, err := q.cfg.Fetcher.Fetch(ctx, url)
	switch {
	case errors.Is(err, linksafety.ErrRefused):
		return fmt.Sprintf("%s (%s): fetch refused: %v", verdict, why, err), nil
	case err != nil:
		return "", err // a network failure: retried with backoff
	}
	reason := fmt.Sprintf("%s (%s): fetched", verdict, why)
	pres, err := q.cfg.KB.Ingest(ctx, kb.IngestRequest{
		Client: t.Client, MainNode: linkRef, Props: map[string]any{"title": page.Title, "fetched": true},
		Content: cmp.Or(page.Title, url) + "\n\n" + page.Text, SourceURN: pageURN, SourceType: "LINK", Kind: kb.KindPage,
		MentionNamespaces: namespaces,
	})
	if err != nil && !isMalformed(err) {
		return "", err
	}
	if err != nil {
		reason = fmt.Sprintf("%s (%s): fetched, but the page has nothing to index: %v", verdict, why, err)
	}
	res.Chunks = append(res.Chunks, pres.Chunks...)
	return reason, nil
}

// isMalformed reports the knowledge base's validation errors: content or a
// ref it will never accept, or chunks its chunk store refuses (vectors of
// another dimension than the client's), so retrying cannot help.
func isMalformed(err error) bool {
	return errors.Is(err, kb.ErrEmptyContent) || errors.Is(err, kb.ErrBinary) || errors.Is(err, kb.ErrTooLarge) ||
		errors.Is(err, kb.ErrBadRef) || errors.Is(err, store.ErrInvalid) || errors.Is(err, graph.ErrInvalid) || errors.Is(err, rag.ErrInvalid)
}

// mentionNamespaces are the namespaces whose type:id mentions in prose
// become nodes for client: those the rules produce and those the client
// declared (store.Client.Namespaces).
func (q *Qualifier) mentionNamespaces(ctx context.Context, client string) ([]string, error) {
	c, err := q.cfg.Store.GetClient(ctx, client)
	if errors.Is(err, store.ErrNotFound) {
		return q.cfg.Kinds.Namespaces(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", client, err)
	}
	return append(q.cfg.Kinds.Namespaces(), c.Namespaces...), nil
}

// compact drops bulky metadata (HTML bodies) from TaskMemory.
func compact(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "html" {
			out[k] = v
		}
	}
	return out
}
