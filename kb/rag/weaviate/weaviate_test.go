package weaviate_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/ragtest"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

var classes atomic.Int64

// server returns TEST_WEAVIATE_URL (deploy/weaviate.sh start prints one). Without it the
// test skips locally, but fails under CI=true, where .ci/run starts a server.
func server(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TEST_WEAVIATE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_WEAVIATE_URL is not set: CI must start Weaviate (deploy/weaviate.sh start)")
		}
		t.Skip("TEST_WEAVIATE_URL not set; run deploy/weaviate.sh start")
	}
	return u
}

// The conformance suite against a real Weaviate: each test gets a class of
// its own, deleted after. Weaviate's BM25 neither stems nor folds accents.
func TestConformance(t *testing.T) {
	u := server(t)
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
	}, ragtest.Caps{})
}
