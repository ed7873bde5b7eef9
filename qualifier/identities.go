package qualifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

// IdentityStore is what the identity loop reads and writes.
type IdentityStore interface {
	store.Identities
	ListClients(ctx context.Context) ([]store.Client, error)
}

// IdentityLoop resolves the identities of every client whose facts or
// decisions changed (kb.KB.ApplyIdentities): aliases recorded, alias nodes
// merged into their person. It runs when woken (a document's facts were
// recorded) after a quiet moment, and every Interval, so that facts
// another process recorded are resolved too.
type IdentityLoop struct {
	Store IdentityStore
	KB    *kb.KB
	// Interval between checks of every client's version (default 10 s).
	Interval time.Duration
	// Settle is how long after a wake-up it waits for more (default 1 s):
	// one pass for a burst of documents. While documents keep coming it
	// waits at least 20 times as long as the last pass took, so that
	// passes (each reads all of a client's facts) take at most ~5 % of
	// the time.
	Settle time.Duration
	Logger *slog.Logger

	wake chan struct{}
	last map[string]string // client → identity version resolved
}

// NewIdentityLoop returns a loop over st and k.
func NewIdentityLoop(st IdentityStore, k *kb.KB, logger *slog.Logger) *IdentityLoop {
	return &IdentityLoop{Store: st, KB: k, Logger: cmp.Or(logger, slog.Default()), wake: make(chan struct{}, 1), last: map[string]string{}}
}

// Wake asks for a pass soon.
func (l *IdentityLoop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run resolves until ctx ends.
func (l *IdentityLoop) Run(ctx context.Context) error {
	interval, settle := cmp.Or(l.Interval, 10*time.Second), cmp.Or(l.Settle, time.Second)
	for {
		start := time.Now()
		if _, err := l.Pass(ctx); err != nil && ctx.Err() == nil {
			l.Logger.Warn("identity resolution", "error", err)
		}
		took := time.Since(start)
		select {
		case <-ctx.Done():
			return nil
		case <-l.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(settle, 20*took)):
			}
		case <-time.After(interval):
		}
	}
}

// Pass resolves every client whose identity version moved since the last
// pass, and returns what each resolution did.
func (l *IdentityLoop) Pass(ctx context.Context) (map[string]kb.ResolvedIdentities, error) {
	clients, err := l.Store.ListClients(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]kb.ResolvedIdentities{}
	var errs []error
	for _, c := range clients {
		v, err := l.Store.IdentityVersion(ctx, c.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v == l.last[c.ID] {
			continue
		}
		res, err := l.KB.ApplyIdentities(ctx, c.ID, l.Store)
		if err != nil {
			errs = append(errs, fmt.Errorf("client %s: %w", c.ID, err))
			continue
		}
		l.last[c.ID] = v
		out[c.ID] = res
		if res.Merged > 0 || len(res.Unaliased) > 0 {
			l.Logger.Debug("identities resolved", "client", c.ID, "persons", res.Persons, "aliases", len(res.Aliases),
				"merged", res.Merged, "ambiguous", len(res.Ambiguous), "unaliased", len(res.Unaliased))
		}
	}
	return out, errors.Join(errs...)
}
