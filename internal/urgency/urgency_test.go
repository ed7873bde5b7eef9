package urgency_test

import (
	"context"
	"testing"
	"time"

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

func TestRecentSaysUrgentWorkWasSeen(t *testing.T) {
	urgency.With(context.Background())
	if !urgency.Recent(time.Minute) {
		t.Fatal("urgent work marked now is not recent")
	}
	time.Sleep(5 * time.Millisecond)
	if urgency.Recent(time.Millisecond) {
		t.Fatal("urgent work marked 5 ms ago is recent within 1 ms")
	}
}
