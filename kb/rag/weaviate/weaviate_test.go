package weaviate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/ragtest"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

var classes atomic.Int64

// The conformance suite against a real Weaviate: each test gets a class of
// its own, deleted after. Weaviate's BM25 neither stems nor folds accents:
// the backend gives it stems without accents (Stems).
func TestConformance(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	ragtest.ExerciseCaps(t, func(t *testing.T) rag.Store {
		s, err := weaviate.Open(weaviate.Config{URL: u, Class: fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.DeleteClass(context.Background()) })
		return s
	}, ragtest.Caps{Stemming: true, FoldsAccents: true})
}

// Stems are what the stemmed properties hold and BM25 is asked: the
// words, lower-cased, accents folded, as English Snowball stems.
func TestStems(t *testing.T) {
	for in, want := range map[string]string{
		"App crashes when opening Ti.UI.Window": "app crash when open ti ui window",
		"Crêpes, reviews; café":                 "crepe review cafe",
		"TIMOB-1234 NullPointerException":       "timob 1234 nullpointerexcept",
		"":                                      "",
	} {
		if got := weaviate.Stems(in); got != want {
			t.Errorf("Stems(%q) = %q, want %q", in, got, want)
		}
	}
}
