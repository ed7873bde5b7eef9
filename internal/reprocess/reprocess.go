// Package reprocess replays a client's source documents through the
// pipeline. The knowledge base is a projection of the source documents
// (ARCHITECTURE §1): a replay sends the selected documents back to the
// indexers (state NEW) and their finished tasks back to the qualifier (state
// NEW, attempts reset; a link task made DONE when indexed stays, its
// document's task records it again), which rebuild what they produced — and, IDs being
// deterministic, rebuild it under the same node keys, edge keys and chunk
// IDs. With Wipe the client's projection is deleted first, so that what is
// rebuilt is all there is.
//
// Only the latest version of each external item is replayed: replaying an
// older one would put stale content back.
package reprocess

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// Request selects what to replay. Zero fields select everything of the
// client.
type Request struct {
	Client      string     `json:"client"`
	SourceType  string     `json:"sourceType,omitempty"`
	DocumentIDs []string   `json:"documentIds,omitempty"`
	Since       *time.Time `json:"since,omitempty"` // observed at or after
	Until       *time.Time `json:"until,omitempty"` // observed before
	// DryRun counts what would be replayed and writes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Wipe deletes the client's knowledge base first; only with no other
	// selection (a partial replay onto an empty projection would lose the
	// rest).
	Wipe bool `json:"wipe,omitempty"`
}

// Progress is how far a replay got.
type Progress struct {
	Selected       int  `json:"selected"`       // documents selected
	Processed      int  `json:"processed"`      // documents handled so far
	DocumentsReset int  `json:"documentsReset"` // sent back to the indexers
	TasksReset     int  `json:"tasksReset"`     // sent back to the qualifier
	Conflicts      int  `json:"conflicts"`      // changed meanwhile: left as they were
	Wiped          bool `json:"wiped"`
}

// Store is what a replay needs of the pipeline state.
type Store interface {
	ListDocuments(ctx context.Context, q store.DocumentQuery) ([]store.Document, error)
	TransitionDocuments(ctx context.Context, ts []store.DocumentTransition) error
	ListTasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error)
	TransitionTasks(ctx context.Context, ts []store.TaskTransition) error
}

// Validate checks a request; given the source types of this build's kinds,
// its source type must be one of them.
func (r Request) Validate(known ...store.SourceType) error {
	switch {
	case store.ValidateClientID(r.Client) != nil:
		return fmt.Errorf("%w: client: %v", store.ErrInvalid, store.ValidateClientID(r.Client))
	case r.SourceType != "" && !store.SourceType(r.SourceType).Valid():
		return fmt.Errorf("%w: sourceType: %q is not a source type (upper-case letters, digits and _)", store.ErrInvalid, r.SourceType)
	case r.SourceType != "" && len(known) > 0 && !slices.Contains(known, store.SourceType(r.SourceType)):
		return fmt.Errorf("%w: sourceType: %q is not the source type of a kind of this build (%s)", store.ErrInvalid, r.SourceType, joinTypes(known))
	case r.Since != nil && r.Until != nil && !r.Until.After(*r.Since):
		return fmt.Errorf("%w: until: not after since", store.ErrInvalid)
	case r.Wipe && (r.SourceType != "" || len(r.DocumentIDs) > 0 || r.Since != nil || r.Until != nil):
		return fmt.Errorf("%w: wipe: only when replaying all of the client's documents", store.ErrInvalid)
	case len(r.DocumentIDs) > 10000:
		return fmt.Errorf("%w: documentIds: more than 10000", store.ErrInvalid)
	}
	return nil
}

// Select returns the documents a request replays: the latest version of
// each external item, filtered.
func Select(ctx context.Context, st Store, r Request) ([]store.Document, error) {
	latest := map[string]store.Document{}
	err := store.EachDocument(ctx, st, store.DocumentQuery{Client: r.Client, SourceType: store.SourceType(r.SourceType)}, func(d store.Document) {
		if cur, ok := latest[d.SourceURN()]; !ok || d.Version > cur.Version {
			latest[d.SourceURN()] = d
		}
	})
	if err != nil {
		return nil, err
	}
	var out []store.Document
	for _, d := range latest {
		switch {
		case len(r.DocumentIDs) > 0 && !slices.Contains(r.DocumentIDs, d.ID):
		case r.Since != nil && d.ObservedAt.Before(*r.Since):
		case r.Until != nil && !d.ObservedAt.Before(*r.Until):
		default:
			out = append(out, d)
		}
	}
	// Oldest first, so that a thread's first message is requalified first.
	slices.SortFunc(out, func(a, b store.Document) int {
		return cmp.Or(a.ObservedAt.Compare(b.ObservedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// replayable are the task states a replay sends back to NEW; tasks that
// are waiting or running are replayed anyway when their turn comes.
var replayable = []store.TaskState{store.TaskDone, store.TaskReadyForGPU, store.TaskCompleted, store.TaskFailed, store.TaskCancelled}

// Wiper deletes a client's whole knowledge base (kb.KB does), for a
// reprocess with Wipe.
type Wiper interface {
	Wipe(ctx context.Context, client string) error
}

// Run replays the request's documents, calling progress after each (and
// once at the start; the documents are sent back replayBatch at a time),
// and returns the final progress.
func Run(ctx context.Context, st Store, k Wiper, r Request, progress func(Progress)) (Progress, error) {
	var p Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := r.Validate(); err != nil {
		return p, err
	}
	docs, err := Select(ctx, st, r)
	if err != nil {
		return p, err
	}
	p.Selected = len(docs)
	progress(p)
	if r.Wipe && !r.DryRun {
		if err := k.Wipe(ctx, r.Client); err != nil {
			return p, err
		}
		p.Wiped = true
	}
	for lo := 0; lo < len(docs); lo += replayBatch {
		batch := docs[lo:min(lo+replayBatch, len(docs))]
		var ts []store.TaskTransition
		var ds []store.DocumentTransition
		for _, d := range batch {
			if err := ctx.Err(); err != nil {
				return p, err
			}
			tasks, err := st.ListTasks(ctx, store.TaskQuery{Client: r.Client, SourceDoc: d.ID, Limit: 10000})
			if err != nil {
				return p, err
			}
			for _, t := range tasks {
				if t.MadeDone() {
					continue // recorded by its document's task (store.DataPayload.Recorded), which replays it
				}
				if slices.Contains(replayable, t.State) {
					ts = append(ts, store.TaskTransition{ID: t.ID, From: t.State, To: store.TaskNew, ResetAttempts: true, Bulk: true, Reason: reason})
				}
			}
			if d.State == store.DocIndexed || d.State == store.DocQuarantined {
				ds = append(ds, store.DocumentTransition{ID: d.ID, From: d.State, To: store.DocNew, ResetAttempts: true, Bulk: true, Reason: reason})
			}
		}
		if r.DryRun {
			p.TasksReset += len(ts)
			p.DocumentsReset += len(ds)
			p.advance(len(batch), progress)
			continue
		}
		// A batch's tasks go back before its documents, as one document's
		// did: a crash between the two leaves tasks to requalify and
		// documents to replay again, both idempotent.
		if len(ts) > 0 {
			applied, err := transitioned(len(ts), st.TransitionTasks(ctx, ts))
			if err != nil {
				return p, err
			}
			p.TasksReset += applied
			p.Conflicts += len(ts) - applied
		}
		if len(ds) > 0 {
			applied, err := transitioned(len(ds), st.TransitionDocuments(ctx, ds))
			if err != nil {
				return p, err
			}
			p.DocumentsReset += applied
			p.Conflicts += len(ds) - applied
		}
		p.advance(len(batch), progress)
	}
	return p, nil
}

// advance counts n more documents processed, telling progress of each.
func (p *Progress) advance(n int, progress func(Progress)) {
	for range n {
		p.Processed++
		progress(*p)
	}
}

// reason is what a replay's transitions record in their events.
const reason = "reprocess"

// replayBatch is how many documents a replay sends back at once: their
// tasks in one write, then the documents in another (a write each per
// document took 5 s of a 5,128-document replay).
const replayBatch = 200

// transitioned reads how many of n transitions applied from their error:
// stale ones (the item moved meanwhile) are skipped, not failures.
func transitioned(n int, err error) (int, error) {
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrIllegalTransition) {
		return 0, err
	}
	var skipped interface{ Unwrap() []error }
	if errors.As(err, &skipped) {
		return n - len(skipped.Unwrap()), nil
	}
	return n - 1, nil
}

func joinTypes(ts []store.SourceType) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return strings.Join(out, ", ")
}
