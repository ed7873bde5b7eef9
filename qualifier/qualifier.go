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
	"time"

	"github.com/jervis-dev/jervis/internal/store"
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
	Concurrency    int    // tasks at once (default 4)
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

// Qualifier is the worker.Handler of the qualification loop.
type Qualifier struct {
	cfg Config
}

var _ worker.Handler[store.Task] = (*Qualifier)(nil)

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
	switch cfg.UncertainLinks = cmp.Or(cfg.UncertainLinks, PolicyAuto); cfg.UncertainLinks {
	case PolicyAuto:
		cfg.UncertainLinks = PolicyRecord
		if cfg.Agent != nil {
			cfg.UncertainLinks = PolicyModel
		}
	case PolicyRecord, PolicyFetch:
	case PolicyModel:
		if cfg.Agent == nil {
			return nil, errors.New("qualifier: uncertain-link policy model needs a qualifier model")
		}
	default:
		return nil, fmt.Errorf("qualifier: uncertain-link policy %q is not %s, %s, %s or %s", cfg.UncertainLinks, PolicyAuto, PolicyRecord, PolicyFetch, PolicyModel)
	}
	return worker.New(store.TaskQueue{Tasks: cfg.Store, Stage: store.StageQualify}, &Qualifier{cfg: cfg}, worker.Config{
		Name: "qualifier", Concurrency: cmp.Or(cfg.Concurrency, 4), LeaseFor: cfg.LeaseFor, BackoffBase: cfg.BackoffBase, PollInterval: cfg.PollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger, Observe: cfg.Observe,
	})
}

// ClassEmptyExtraction is the class of tasks whose model answered without
// using any tool: retried, then FAILED with that reason.
const ClassEmptyExtraction = "empty_extraction"

// Handle implements worker.Handler.
func (q *Qualifier) Handle(ctx context.Context, job worker.Job[store.Task]) (worker.Result, error) {
	t := job.Item
	doc, err := q.cfg.Store.GetDocument(ctx, t.Client, t.SourceDoc)
	if errors.Is(err, store.ErrNotFound) {
		return worker.Result{}, worker.Permanent(fmt.Errorf("task %s: source document %s is gone", t.ID, t.SourceDoc))
	}
	if err != nil {
		return worker.Result{}, err
	}
	if t.Kind == store.KindLink {
		return q.link(ctx, t, doc)
	}
	namespaces, err := q.mentionNamespaces(ctx, t.Client)
	if err != nil {
		return worker.Result{}, err
	}
	shape := q.cfg.Kinds.Shape(doc)
	structure := rules.Structure(shape, doc)
	structure.MentionNamespaces = namespaces
	res, err := q.cfg.KB.Ingest(ctx, structure)
	if err != nil {
		if isMalformed(err) {
			return worker.Result{}, worker.Malformed(fmt.Errorf("document %s: %w", doc.ExternalID, err))
		}
		return worker.Result{}, fmt.Errorf("ingest %s: %w", doc.ExternalID, err)
	}
	if err := q.identities(ctx, doc, shape, append(slices.Clone(res.Nodes), res.Aliased...)); err != nil {
		return worker.Result{}, err
	}
	if err := q.possibleDuplicates(ctx, doc, structure, &res); err != nil {
		return worker.Result{}, err
	}
	decision, reason := rules.Route(shape, doc, q.cfg.Users)
	asks := rules.Asked(shape, doc)
	summary := rules.Summary(shape, doc, decision, reason)
	var usage []byte
	if q.cfg.Agent != nil {
		out, err := q.cfg.Agent.Qualify(ctx, agent.Input{TaskID: t.ID, Client: t.Client, Document: doc, MainNode: res.MainNode,
			Content: structure.Content, Summary: summary, Decision: decision, Reason: reason})
		usage, _ = json.Marshal(out.Usage)
		if errors.Is(err, agent.ErrEmptyExtraction) {
			return worker.Result{}, worker.Classify(ClassEmptyExtraction, false, true, fmt.Errorf("document %s: %w", doc.ExternalID, err))
		}
		if err != nil {
			return worker.Result{}, err
		}
		decision, reason, summary = out.Decision, out.Reason, out.Summary
		res.Nodes, res.Chunks = append(res.Nodes, out.Nodes...), append(res.Chunks, out.Chunks...)
	}
	structured, _ := json.Marshal(map[string]any{"title": doc.Normalized.Title, "metadata": compact(doc.Normalized.Metadata)})
	mem := store.TaskMemory{
		TaskID: t.ID, CorrelationID: t.CorrelationID, Client: t.Client, ContextSummary: summary,
		GraphNodeKeys: res.Nodes, RAGDocumentIDs: res.Chunks, StructuredData: structured,
		RoutingDecision: store.TaskState(decision), RoutingReason: reason, SourceType: doc.SourceType, SourceID: doc.ID,
		Warnings: res.Warnings, MainNode: res.MainNode, Asks: &asks,
	}
	if err := q.cfg.Store.SaveTaskMemory(ctx, mem); err != nil {
		return worker.Result{}, fmt.Errorf("task memory: %w", err)
	}
	return worker.Result{Next: decision, Usage: usage}, nil
}

// identities records what the document says about who its people are
// (IdentityFacts): the identity resolver's input (IdentityLoop).
func (q *Qualifier) identities(ctx context.Context, doc store.Document, shape pollers.Shape, nodes []string) error {
	source, facts := IdentityFacts(shape, doc, nodes)
	if source == "" {
		return nil
	}
	if err := q.cfg.Store.PutIdentityFacts(ctx, doc.Client, source, facts); err != nil {
		return fmt.Errorf("identity facts: %w", err)
	}
	if len(facts) > 0 && q.cfg.OnIdentities != nil {
		q.cfg.OnIdentities()
	}
	return nil
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
	sim, err := q.cfg.KB.Similar(ctx, kb.SimilarRequest{Client: doc.Client, SourceURN: req.SourceURN, Title: req.Title, Text: req.Content,
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

// link handles a LINK_PROCESSING task: a link already fetched is DONE; a
// link is classified (qualifier/linksafety) and recorded — a link node,
// found_in its source document, with the text around it as evidence — and a
// SAFE one (or an UNCERTAIN one under PolicyFetch, or that the model chose
// under PolicyModel) is fetched by the guarded
// client and its page ingested as the link node's content. A fetched page's
// own links are in its text; they are never queued.
func (q *Qualifier) link(ctx context.Context, t store.Task, doc store.Document) (worker.Result, error) {
	var p store.LinkPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.URL == "" {
		return worker.Result{}, worker.Permanent(fmt.Errorf("task %s: link payload: %v", t.ID, err))
	}
	linkRef := kb.BoundedRef("link", p.URL)
	pageURN := "page:" + p.URL
	patterns, err := q.cfg.Store.ListLinkPatterns(ctx, t.Client)
	if err != nil {
		return worker.Result{}, err
	}
	verdict, why := linksafety.Classify(p.URL, patterns)
	fetch := verdict == linksafety.Safe || verdict == linksafety.Uncertain && q.cfg.UncertainLinks == PolicyFetch
	var usage []byte
	if verdict == linksafety.Uncertain && q.cfg.UncertainLinks == PolicyModel {
		d, err := q.cfg.Agent.DecideLink(ctx, p.URL, p.Context)
		usage, _ = json.Marshal(d.Usage)
		if err != nil {
			return worker.Result{}, err // retried with backoff, then FAILED with the reason
		}
		fetch, why = d.Fetch, why+"; "+d.Reason
	}
	reason := fmt.Sprintf("%s (%s): recorded, not fetched", verdict, why)
	if fetch {
		reason = fmt.Sprintf("%s (%s): fetched", verdict, why)
	}
	evidence := "Link " + p.URL + " found in " + cmp.Or(p.Title, doc.ExternalID)
	if p.Context != "" {
		evidence += ":\n\n" + p.Context
	}
	namespaces, err := q.mentionNamespaces(ctx, t.Client)
	if err != nil {
		return worker.Result{}, err
	}
	res, err := q.cfg.KB.Ingest(ctx, kb.IngestRequest{
		Client: t.Client, MainNode: linkRef, Props: map[string]any{"url": p.URL, "verdict": string(verdict)},
		Content: evidence, Relations: []kb.MetaRelation{{From: linkRef, Type: "found_in", To: q.cfg.Kinds.Shape(doc).Main}},
		SourceURN: "link:" + t.ID, SourceType: string(doc.SourceType), Kind: kb.KindLink, ObservedAt: doc.ObservedAt,
		MentionNamespaces: namespaces,
	})
	if err != nil {
		if isMalformed(err) {
			return worker.Result{}, worker.Malformed(fmt.Errorf("link %s: %w", p.URL, err))
		}
		return worker.Result{}, err
	}
	if fetch {
		done, err := q.cfg.KB.Indexed(ctx, t.Client, pageURN)
		switch {
		case err != nil:
			return worker.Result{}, err
		case done:
			reason = fmt.Sprintf("%s (%s): already fetched and indexed", verdict, why)
		default:
			page, err := q.cfg.Fetcher.Fetch(ctx, p.URL)
			switch {
			case errors.Is(err, linksafety.ErrRefused):
				reason = fmt.Sprintf("%s (%s): fetch refused: %v", verdict, why, err)
			case err != nil:
				return worker.Result{}, err // a network failure: retried with backoff
			default:
				pres, err := q.cfg.KB.Ingest(ctx, kb.IngestRequest{
					Client: t.Client, MainNode: linkRef, Props: map[string]any{"title": page.Title, "fetched": true},
					Content: cmp.Or(page.Title, p.URL) + "\n\n" + page.Text, SourceURN: pageURN, SourceType: "LINK", Kind: kb.KindPage,
					MentionNamespaces: namespaces,
				})
				if err != nil && !isMalformed(err) {
					return worker.Result{}, err
				}
				if err != nil {
					reason = fmt.Sprintf("%s (%s): fetched, but the page has nothing to index: %v", verdict, why, err)
				}
				res.Chunks = append(res.Chunks, pres.Chunks...)
			}
		}
	}
	if err := q.cfg.Store.SaveTaskMemory(ctx, store.TaskMemory{
		TaskID: t.ID, CorrelationID: t.CorrelationID, Client: t.Client, ContextSummary: evidence,
		GraphNodeKeys: res.Nodes, RAGDocumentIDs: res.Chunks, RoutingDecision: store.TaskDone, RoutingReason: reason,
		SourceType: doc.SourceType, SourceID: doc.ID, Warnings: res.Warnings,
	}); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{Next: rules.Done, Usage: usage}, nil
}

// isMalformed reports the knowledge base's validation errors: content or a
// ref it will never accept, so retrying cannot help.
func isMalformed(err error) bool {
	return errors.Is(err, kb.ErrEmptyContent) || errors.Is(err, kb.ErrBinary) || errors.Is(err, kb.ErrTooLarge) ||
		errors.Is(err, kb.ErrBadRef) || errors.Is(err, store.ErrInvalid) || errors.Is(err, graph.ErrInvalid)
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
