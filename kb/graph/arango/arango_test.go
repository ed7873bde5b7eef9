package arango_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/graph/arango"
	"github.com/jervis-dev/jervis/kb/graph/graphtest"
)

// TestConformance runs graphtest against a real ArangoDB: TEST_ARANGO_URL
// (e.g. http://127.0.0.1:8529), with TEST_ARANGO_PASSWORD for root. Each
// test gets a database of its own, dropped after it.
func TestConformance(t *testing.T) {
	u := integration.Optional(t, "TEST_ARANGO_URL", "start ArangoDB (docker run -e ARANGO_NO_AUTH=1 -p 8529:8529 arangodb:3.12) and export TEST_ARANGO_URL=http://127.0.0.1:8529")
	var n atomic.Int64
	graphtest.Exercise(t, func(t *testing.T) graph.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := arango.Open(ctx, arango.Config{URL: u, Password: os.Getenv("TEST_ARANGO_PASSWORD"),
			Database: fmt.Sprintf("jervis_test_%d_%d", time.Now().UnixNano()%1e9, n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.DropDatabase(context.Background()) })
		return s
	})
}
