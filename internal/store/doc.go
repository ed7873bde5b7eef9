// Package store holds Jervis's durable pipeline state: immutable source
// document versions with their processing state, pending tasks, TaskMemory,
// the append-only event log, the per-client alias registry, poller cursors,
// and clients with their hashed API keys.
//
// The package defines the data model (ARCHITECTURE §4), the state machines of
// documents and tasks, and small role interfaces (Documents, Tasks, Memories,
// Events, Aliases, Cursors, Clients). Backends live in sub-packages: sqlite is
// the embedded default; every backend must pass storetest.Exercise.
//
// Contract shared by all backends:
//
//   - IDs are deterministic (DocumentID, TaskID), so putting the same
//     document or task twice is a no-op.
//   - Every state change is a compare-and-set from an expected state, checked
//     against the transition table (CanTransitionDocument, CanTransitionTask):
//     an illegal one fails with ErrIllegalTransition, a stale one with
//     ErrConflict, and nothing is written.
//   - Every state change appends its event to the event log atomically with
//     the change itself (one call = one atomic unit in every backend).
//   - No call needs a multi-document transaction that spans calls: a step
//     that writes several things (store the tasks of a document, then mark it
//     INDEXED) is ordered and idempotent, so a crash between the calls is
//     repaired when the lease expires and the step is redone.
package store
