// Package executor runs READY_FOR_GPU tasks — the work that needs a big
// model — only while no user waits, and yields the moment one arrives.
//
// A Monitor counts the API's user requests in flight. The execution loop
// (the core worker loop, stage execute: READY_FOR_GPU → EXECUTION →
// COMPLETED) claims only when the users have been idle for the threshold
// (30 s by default); a user request cancels the running task at once with
// worker.ErrPreempted, which aborts its model call in flight and hands the
// task back to READY_FOR_GPU without spending an attempt. What a preempted
// run produced is discarded: results are written only after a run ends
// unpreempted, so there is never a half-written result.
//
// A run is a Workflow: the Ollama workflow agent (Agent) when a model is
// configured, else the extractive workflow (Extractive), a digest built from
// TaskMemory and the graph. Its result is stored with the task, ingested as
// a result node (result:<task id>) linked to the source document's node with
// the result text as evidence, and announced in the event log
// (execution.run events give every run's span and outcome).
package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
)

// Store is what the executor needs from the pipeline state.
type Store interface {
	store.Documents
	store.Tasks
	store.Memories
	store.Events
}

// Output is what a workflow produced for a task; it is stored as the task's
// result.
type Output struct {
	Workflow   string      `json:"workflow"` // "agent" or "extractive"
	Model      string      `json:"model,omitempty"`
	Text       string      `json:"text"` // the result: analysis, suggested actions, draft reply
	Digest     *Digest     `json:"digest,omitempty"`
	StopReason string      `json:"stopReason,omitempty"`
	ResultNode string      `json:"resultNode"`
	Usage      store.Usage `json:"-"`
}

// Workflow produces the result of one task. It must return promptly when
// ctx is cancelled and must not write anything: the executor stores the
// output only when the run was not preempted.
type Workflow interface {
	Name() string
	Run(ctx context.Context, in Input) (Output, error)
}

// Input is what a workflow starts from.
type Input struct {
	Task     store.Task
	Memory   store.TaskMemory
	Document store.Document
	MainNode string // the source document's node
}

// Config configures the executor.
type Config struct {
	Store    Store
	KB       *kb.KB
	Monitor  *Monitor
	Workflow Workflow // default Extractive
	// Concurrency is how many tasks run at once (default 1: one GPU).
	Concurrency     int
	LeaseFor        time.Duration
	PollInterval    time.Duration
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	Observe         func(stage string, outcome worker.Outcome, took time.Duration)
}

// Executor is the execution loop.
type Executor struct {
	cfg Config
	w   *worker.Worker[store.Task]
	log *slog.Logger
}

// EventRun is the event of one execution run: its span and outcome
// (RunEvent).
const EventRun = "execution.run"

// RunEvent is the Data of an execution.run event.
type RunEvent struct {
	Workflow string    `json:"workflow"`
	Attempt  int       `json:"attempt"`
	Started  time.Time `json:"started"`
	Stopped  time.Time `json:"stopped"`
	Outcome  string    `json:"outcome"` // completed, preempted, failed
	Error    string    `json:"error,omitempty"`
	Result   string    `json:"resultNode,omitempty"`
	Chars    int       `json:"chars,omitempty"`
}

// New returns the execution loop.
func New(cfg Config) (*Executor, error) {
	if cfg.Store == nil || cfg.KB == nil || cfg.Monitor == nil {
		return nil, errors.New("executor: store, knowledge base and monitor are required")
	}
	if cfg.Workflow == nil {
		cfg.Workflow = &Extractive{KB: cfg.KB}
	}
	e := &Executor{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
	w, err := worker.New(gatedQueue{store.TaskQueue{Tasks: cfg.Store, Stage: store.StageExecute}, cfg.Monitor}, e, worker.Config{
		Name: "executor", Concurrency: cmp.Or(cfg.Concurrency, 1), LeaseFor: cfg.LeaseFor, PollInterval: cfg.PollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger, Observe: cfg.Observe,
	})
	if err != nil {
		return nil, err
	}
	e.w = w
	return e, nil
}

// Run runs the loop until ctx ends; it claims at once when the users become
// idle.
func (e *Executor) Run(ctx context.Context) error {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.cfg.Monitor.IdleSignal():
				e.w.Wake()
			}
		}
	}()
	return e.w.Run(ctx)
}

// Wake makes an idle loop look for work at once.
func (e *Executor) Wake() { e.w.Wake() }

// gatedQueue claims only while the users are idle, so that tasks do not go
// to EXECUTION just to be handed back.
type gatedQueue struct {
	store.TaskQueue
	m *Monitor
}

func (q gatedQueue) Claim(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]worker.Job[store.Task], error) {
	if !q.m.Idle() {
		return nil, nil
	}
	return q.TaskQueue.Claim(ctx, owner, limit, leaseFor)
}

// Handle implements worker.Handler.
func (e *Executor) Handle(ctx context.Context, job worker.Job[store.Task]) (worker.Result, error) {
	t := job.Item
	in, err := e.input(ctx, t)
	if err != nil {
		return worker.Result{}, err
	}
	wctx, work, err := e.cfg.Monitor.Begin(ctx)
	if err != nil {
		return worker.Result{}, err // users active: back to READY_FOR_GPU, no attempt spent
	}
	out, runErr := e.cfg.Workflow.Run(wctx, in)
	completed := work.End()
	started, stopped := work.Span()
	ev := RunEvent{Workflow: e.cfg.Workflow.Name(), Attempt: job.Attempt, Started: started, Stopped: stopped, Outcome: "completed"}
	switch {
	case !completed:
		ev.Outcome = "preempted"
	case runErr != nil:
		ev.Outcome, ev.Error = "failed", runErr.Error()
	default:
		out.ResultNode = "result:" + t.ID
		ev.Result, ev.Chars = out.ResultNode, len(out.Text)
	}
	if completed && runErr == nil {
		if err := e.storeResult(ctx, in, out); err != nil {
			return worker.Result{}, err
		}
	}
	// The event is written even when the job's context ended (shutdown).
	if err := e.event(context.WithoutCancel(ctx), t, ev); err != nil {
		e.log.Warn("execution event not recorded", "task", t.ID, "err", err)
	}
	if !completed {
		return worker.Result{}, fmt.Errorf("task %s: %w", t.ID, worker.ErrPreempted)
	}
	if runErr != nil {
		return worker.Result{}, runErr
	}
	output, err := json.Marshal(out)
	if err != nil {
		return worker.Result{}, err
	}
	usage, _ := json.Marshal(out.Usage)
	return worker.Result{Output: output, Usage: usage}, nil
}

// input loads what a run starts from. A task whose document or memory is
// gone cannot run: it fails for good.
func (e *Executor) input(ctx context.Context, t store.Task) (Input, error) {
	doc, err := e.cfg.Store.GetDocument(ctx, t.Client, t.SourceDoc)
	if errors.Is(err, store.ErrNotFound) {
		return Input{}, worker.Permanent(fmt.Errorf("task %s: source document %s is gone", t.ID, t.SourceDoc))
	}
	if err != nil {
		return Input{}, err
	}
	mem, err := e.cfg.Store.GetTaskMemory(ctx, t.Client, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return Input{}, worker.Permanent(fmt.Errorf("task %s has no TaskMemory: requalify its document", t.ID))
	}
	if err != nil {
		return Input{}, err
	}
	main := mem.MainNode
	if main == "" && len(mem.GraphNodeKeys) > 0 {
		main = mem.GraphNodeKeys[0] // a memory written before MainNode was kept
	}
	return Input{Task: t, Memory: mem, Document: doc, MainNode: main}, nil
}

// storeResult ingests the result as node result:<task id>, linked to the
// source document's node with the result text as evidence. Ingest replaces
// an earlier version of the same result, so a rerun after a crash leaves one.
func (e *Executor) storeResult(ctx context.Context, in Input, out Output) error {
	origin := graph.OriginMetadata
	if out.Workflow == "agent" {
		origin = graph.OriginLLM
	}
	_, err := e.cfg.KB.Ingest(ctx, kb.IngestRequest{
		Client: in.Task.Client, MainNode: out.ResultNode, SourceURN: out.ResultNode, SourceType: "EXECUTOR", Kind: kb.KindResult,
		Props:        map[string]any{"task": in.Task.ID, "workflow": out.Workflow, "sourceDoc": in.Task.SourceDoc},
		Content:      out.Text,
		MentionsOnly: true, // the text reports on relations; it is not their evidence
		Relations:    []kb.MetaRelation{{From: out.ResultNode, Type: "result_of", To: in.MainNode, Origin: origin}},
		ObservedAt:   time.Now().UTC(),
	})
	if err != nil {
		return fmt.Errorf("store the result of %s: %w", in.Task.ID, err)
	}
	return nil
}

func (e *Executor) event(ctx context.Context, t store.Task, ev RunEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = e.cfg.Store.AppendEvent(ctx, store.Event{Client: t.Client, Aggregate: store.AggregateTask, AggregateID: t.ID, Type: EventRun, Data: data})
	return err
}
