// Package embeddedtest opens a fresh embedded data directory for a test.
package embeddedtest

import (
	"context"
	"testing"

	"github.com/jervis-dev/jervis/kb/embedded"
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

// OpenWith is Open with some backends given (see embedded.Backends).
func OpenWith(t testing.TB, dir string, b embedded.Backends) *embedded.All {
	t.Helper()
	all, err := embedded.OpenWith(context.Background(), dir, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { all.Close() })
	return all
}
