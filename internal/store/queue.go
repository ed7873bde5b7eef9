package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jervis-dev/jervis/internal/worker"
)

// TaskQueue is the worker.Queue of one task stage.
type TaskQueue struct {
	Tasks Tasks
	Stage Stage
}

var _ worker.UrgentQueue[Task] = TaskQueue{}

// Claim implements worker.Queue.
func (q TaskQueue) Claim(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]worker.Job[Task], error) {
	return q.claim(ctx, owner, limit, leaseFor, false)
}

// ClaimUrgent implements worker.UrgentQueue.
func (q TaskQueue) ClaimUrgent(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]worker.Job[Task], error) {
	return q.claim(ctx, owner, limit, leaseFor, true)
}

func (q TaskQueue) claim(ctx context.Context, owner string, limit int, leaseFor time.Duration, urgent bool) ([]worker.Job[Task], error) {
	now := time.Now()
	ts, err := q.Tasks.ClaimTasks(ctx, q.Stage, Claim{Owner: owner, Limit: limit, Now: now, LeaseUntil: now.Add(leaseFor), Urgent: urgent})
	if err != nil {
		return nil, err
	}
	jobs := make([]worker.Job[Task], len(ts))
	for i, t := range ts {
		jobs[i] = worker.Job[Task]{ID: t.ID, Attempt: t.Attempts, MaxAttempts: t.MaxAttempts, Priority: t.Priority, Item: t}
	}
	return jobs, nil
}

// Extend implements worker.Queue.
func (q TaskQueue) Extend(ctx context.Context, owner string, ids []string, leaseFor time.Duration) error {
	_, err := q.Tasks.ExtendTaskLeases(ctx, owner, ids, time.Now().Add(leaseFor))
	return err
}

// Ack implements worker.Queue. A handler that names a state its stage cannot
// finish in fails the task with class "invalid_result".
func (q TaskQueue) Ack(ctx context.Context, owner string, acks []worker.Ack) error {
	ts := make([]TaskTransition, len(acks))
	for i, a := range acks {
		t := TaskTransition{ID: a.ID, From: q.Stage.Running(), Owner: owner, Reason: a.Outcome.String()}
		switch a.Outcome {
		case worker.Succeeded:
			t.To = TaskState(a.Next)
			if t.To == "" {
				t.To = q.Stage.Succeeded()[0]
			}
			if !slices.Contains(q.Stage.Succeeded(), t.To) {
				t.Error = &ErrorInfo{Class: "invalid_result", Message: fmt.Sprintf("handler chose %q; stage %s finishes in %v", a.Next, q.Stage, q.Stage.Succeeded())}
				t.To = TaskFailed
				break
			}
			t.Result = a.Output
			if len(a.Usage) > 0 {
				var u Usage
				if err := json.Unmarshal(a.Usage, &u); err == nil {
					t.Usage = &u
				}
			}
			// Entering a new stage starts its attempts afresh.
			t.ResetAttempts = t.To == TaskReadyForGPU
		case worker.Retry:
			t.To, t.RunAfter, t.Error = q.Stage.RetryState(), a.RunAfter, errorInfo(a.Failure)
		case worker.Failed:
			t.To, t.Error = TaskFailed, errorInfo(a.Failure)
		case worker.Released:
			t.To, t.RefundAttempt, t.Reason = q.Stage.ReleaseState(), true, a.Reason
		}
		ts[i] = t
	}
	return q.Tasks.TransitionTasks(ctx, ts)
}

// Rescue implements worker.Queue.
func (q TaskQueue) Rescue(ctx context.Context) (int, error) {
	return q.Tasks.RescueTasks(ctx, q.Stage, time.Now())
}

// DocumentQueue is the worker.Queue of the indexers: NEW documents are
// claimed into INDEXING and finish INDEXED; failures quarantine them.
type DocumentQueue struct {
	Documents Documents
}

var _ worker.UrgentQueue[Document] = DocumentQueue{}

// Claim implements worker.Queue.
func (q DocumentQueue) Claim(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]worker.Job[Document], error) {
	return q.claim(ctx, owner, limit, leaseFor, false)
}

// ClaimUrgent implements worker.UrgentQueue.
func (q DocumentQueue) ClaimUrgent(ctx context.Context, owner string, limit int, leaseFor time.Duration) ([]worker.Job[Document], error) {
	return q.claim(ctx, owner, limit, leaseFor, true)
}

func (q DocumentQueue) claim(ctx context.Context, owner string, limit int, leaseFor time.Duration, urgent bool) ([]worker.Job[Document], error) {
	now := time.Now()
	ds, err := q.Documents.ClaimDocuments(ctx, Claim{Owner: owner, Limit: limit, Now: now, LeaseUntil: now.Add(leaseFor), Urgent: urgent})
	if err != nil {
		return nil, err
	}
	jobs := make([]worker.Job[Document], len(ds))
	for i, d := range ds {
		jobs[i] = worker.Job[Document]{ID: d.ID, Attempt: d.Attempts, MaxAttempts: d.MaxAttempts, Priority: d.Priority, Item: d}
	}
	return jobs, nil
}

// Extend implements worker.Queue.
func (q DocumentQueue) Extend(ctx context.Context, owner string, ids []string, leaseFor time.Duration) error {
	_, err := q.Documents.ExtendDocumentLeases(ctx, owner, ids, time.Now().Add(leaseFor))
	return err
}

// Ack implements worker.Queue.
func (q DocumentQueue) Ack(ctx context.Context, owner string, acks []worker.Ack) error {
	ts := make([]DocumentTransition, len(acks))
	for i, a := range acks {
		t := DocumentTransition{ID: a.ID, From: DocIndexing, Owner: owner, Reason: a.Outcome.String()}
		switch a.Outcome {
		case worker.Succeeded:
			t.To = DocIndexed
		case worker.Retry:
			t.To, t.RunAfter, t.Error = DocNew, a.RunAfter, errorInfo(a.Failure)
		case worker.Failed:
			t.To, t.Error = DocQuarantined, errorInfo(a.Failure)
		case worker.Released:
			t.To, t.RefundAttempt, t.Reason = DocNew, true, a.Reason
		}
		ts[i] = t
	}
	return q.Documents.TransitionDocuments(ctx, ts)
}

// Rescue implements worker.Queue.
func (q DocumentQueue) Rescue(ctx context.Context) (int, error) {
	return q.Documents.RescueDocuments(ctx, time.Now())
}

func errorInfo(f *worker.Failure) *ErrorInfo {
	if f == nil {
		return nil
	}
	return &ErrorInfo{Class: f.Class, Message: f.Message, Recoverable: f.Recoverable}
}
