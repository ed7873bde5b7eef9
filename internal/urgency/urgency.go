// Package urgency marks work a user waits for (a live document, its tasks)
// on its context, so that what it waits on — a store's one writer — serves
// it before bulk work queued earlier.
package urgency

import "context"

type key struct{}

// With returns ctx marked urgent.
func With(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// Of reports whether ctx is marked urgent.
func Of(ctx context.Context) bool {
	u, _ := ctx.Value(key{}).(bool)
	return u
}
