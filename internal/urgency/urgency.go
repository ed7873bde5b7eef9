// Package urgency marks work a user waits for (a live document, its tasks)
// on its context, so that what it waits on — a store's one writer — serves
// it before bulk work queued earlier.
package urgency

import (
	"context"
	"sync/atomic"
	"time"
)

type key struct{}

// last is when With was last called (Unix nanoseconds; 0: never).
var last atomic.Int64

// With returns ctx marked urgent, and notes that urgent work was seen now
// (Recent).
func With(ctx context.Context) context.Context {
	last.Store(time.Now().UnixNano())
	return context.WithValue(ctx, key{}, true)
}

// Of reports whether ctx is marked urgent.
func Of(ctx context.Context) bool {
	u, _ := ctx.Value(key{}).(bool)
	return u
}

// Window is how long after urgent work was last marked the process counts
// as serving live documents (Recent(Window)): the qualifier keeps its bulk
// writes short, and the SQLite stores copy their WAL in small checkpoints,
// so that a live document waits behind little.
const Window = 2 * time.Second

// Recent reports whether urgent work was marked (With) in this process
// within d: bulk work may then keep its writes short, since urgent work
// that comes waits for the write in flight.
func Recent(d time.Duration) bool {
	at := last.Load()
	return at != 0 && time.Since(time.Unix(0, at)) <= d
}
