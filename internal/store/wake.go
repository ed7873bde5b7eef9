package store

import "context"

// Waking is a Store whose writes that give this process's workers
// something new to claim — a new document version, new tasks — call
// Documents or Tasks once they are committed, so the indexers and the
// qualifier start at once instead of at their next poll (another
// process's writes still wait for it, or for a change stream). Set the
// functions before the workers run; nil ones are skipped.
type Waking struct {
	Store
	Documents func() // a document version was stored
	Tasks     func() // tasks were enqueued
}

// PutDocument stores doc and, when it is new, wakes the indexers.
func (w *Waking) PutDocument(ctx context.Context, doc Document) (Document, bool, error) {
	stored, created, err := w.Store.PutDocument(ctx, doc)
	if created && err == nil && w.Documents != nil {
		w.Documents()
	}
	return stored, created, err
}

// EnqueueTasks enqueues tasks and, when any is new, wakes the qualifier.
func (w *Waking) EnqueueTasks(ctx context.Context, tasks ...Task) (int, error) {
	n, err := w.Store.EnqueueTasks(ctx, tasks...)
	if n > 0 && w.Tasks != nil {
		w.Tasks()
	}
	return n, err
}
