// Package pollers fetches what changed in a team's sources and stores it as
// NEW source documents; it never processes content (the indexers and the
// qualifier do).
//
// A Source knows one connection's protocol (pollers/email, pollers/filedrop,
// ...). One Scheduler runs every connection: on its cron schedule and when
// asked (PollNow), it calls Poll with the committed cursor, stores the
// documents it returns and only then commits the new cursor, so a crash
// between the two re-fetches documents that are already stored, which the
// store recognises (same content, same ID): nothing is duplicated. Each poll
// is recorded in the event log.
package pollers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// Source fetches one connection's items.
type Source interface {
	// Poll returns the items changed since cursor ("" = from the beginning)
	// and the cursor that covers them. It must return promptly when ctx is
	// cancelled. An item the source cannot parse is returned all the same,
	// with its raw bytes and store.MetaParseError set in its metadata: it is
	// stored, and the indexers quarantine it with that reason.
	Poll(ctx context.Context, cursor string) (Batch, error)
}

// Batch is what one Poll returns.
type Batch struct {
	Documents []store.Document
	// Cursor covers Documents; the scheduler commits it after storing them.
	Cursor string
	// More says another page is waiting: the scheduler polls again at once.
	More bool
}

// RetryAfterError is a source error that says when to try again (an HTTP
// 429 or 503 with Retry-After).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns how long err asks to wait, or 0.
func RetryAfter(err error) time.Duration {
	var r *RetryAfterError
	if errors.As(err, &r) {
		return r.After
	}
	return 0
}
