package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/graph/graphtest"
	"github.com/jervis-dev/jervis/kb/graph/sqlite"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	graphtest.Exercise(t, func(t *testing.T) graph.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), sqlite.FileName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
