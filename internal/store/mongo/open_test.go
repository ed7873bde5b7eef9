package mongo

import (
	"context"
	"testing"

	"github.com/jervis-dev/jervis/internal/integration"
)

// testURI is the server the tests run against (TEST_MONGO_URI).
func testURI(t *testing.T) string {
	t.Helper()
	return integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
}

// openDropped opens a store with o (its URI testURI's) on a database
// dropped first — its indexes too: a test makes what it needs — and after
// the test.
func openDropped(t *testing.T, o Options) *Store {
	t.Helper()
	o.URI = testURI(t)
	s, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Drop(t.Context())
	t.Cleanup(func() { _ = s.Drop(context.Background()); _ = s.Close() })
	return s
}
