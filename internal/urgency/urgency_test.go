package urgency_test

import (
	"context"
	"testing"

	"github.com/jervis-dev/jervis/internal/urgency"
)

func TestWithAndOf(t *testing.T) {
	ctx := context.Background()
	if urgency.Of(ctx) {
		t.Fatal("a plain context is urgent")
	}
	u := urgency.With(ctx)
	if !urgency.Of(u) {
		t.Fatal("a marked context is not urgent")
	}
	child, cancel := context.WithCancel(u)
	defer cancel()
	if !urgency.Of(child) {
		t.Fatal("urgency is not inherited")
	}
}
