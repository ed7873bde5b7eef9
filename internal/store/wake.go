package store

import "context"

// Waking is a Store whose writes that give this process's workers
// something new to claim — a new document version, new tasks — wake
// Documents or Tasks once they are committed, so the indexers and the
// qualifier start at once instead of at their next poll (another
// process's writes still wait for it, or for a change stream). What is
// stored above PriorityBulk wakes them urgently: it is claimed even while
// every slot is busy with bulk work. Set the wakers before the workers
// run; nil ones are skipped.
type Waking struct {
	Store
	Documents Waker // a document version was stored
	Tasks     Waker // tasks were enqueued
}

// Waker is a worker loop that can be woken (worker.Worker).
type Waker interface {
	Wake()
	WakeUrgent()
}

// PutDocument stores doc and, when it is new, wakes the indexers.
func (w *Waking) PutDocument(ctx context.Context, doc Document) (Document, bool, error) {
	stored, created, err := w.Store.PutDocument(ctx, doc)
	if created && err == nil && w.Documents != nil {
		wake(w.Documents, stored.Priority > PriorityBulk)
	}
	return stored, created, err
}

// PutDocuments stores docs and, when any is new, wakes the indexers once.
func (w *Waking) PutDocuments(ctx context.Context, docs []Document) ([]PutResult, error) {
	results, err := w.Store.PutDocuments(ctx, docs)
	if err != nil || w.Documents == nil {
		return results, err
	}
	created, urgent := false, false
	for _, r := range results {
		if r.Created {
			created, urgent = true, urgent || r.Stored.Priority > PriorityBulk
		}
	}
	if created {
		wake(w.Documents, urgent)
	}
	return results, nil
}

// EnqueueTasks enqueues tasks and, when any is new, wakes the qualifier.
func (w *Waking) EnqueueTasks(ctx context.Context, tasks ...Task) (int, error) {
	n, err := w.Store.EnqueueTasks(ctx, tasks...)
	if n > 0 && w.Tasks != nil {
		urgent := false
		for _, t := range tasks {
			urgent = urgent || t.Priority > PriorityBulk
		}
		wake(w.Tasks, urgent)
	}
	return n, err
}

func wake(w Waker, urgent bool) {
	if urgent {
		w.WakeUrgent()
		return
	}
	w.Wake()
}
