// Package embeddedtest opens a fresh embedded data directory for a test.
package embeddedtest

import (
	"context"
	"testing"

	"github.com/jervis-dev/jervis/internal/embedded"
)

// Open opens the pipeline store and knowledge base in dir (a new temporary
// directory when dir is ""), closed when the test ends.
func Open(t testing.TB, dir string) *embedded.All {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	all, err := embedded.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { all.Close() })
	return all
}
