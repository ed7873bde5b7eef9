package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/glove"
)

// kb.New tells a chunk store that builds vector lists (rag.QuerySpace)
// how many common directions search takes out of a query's vector
// (embed.CommonRemover): a client's lists are made in that space.
func TestKBTellsTheStoreTheQuerySpace(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "chunks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.vectorsOf("before").q8.common; got != 0 {
		t.Fatalf("a new store takes %d directions out, want 0 until told", got)
	}
	e, err := glove.New()
	if err != nil {
		t.Fatal(err)
	}
	if e.CommonComponents() == 0 {
		t.Fatal("GloVe takes no directions out: the test checks nothing")
	}
	kb.New(kb.Config{Chunks: s, Embedder: e})
	if s.common != e.CommonComponents() {
		t.Fatalf("store told %d directions, the embedder takes %d out", s.common, e.CommonComponents())
	}
	if got := s.vectorsOf("acme").q8.common; got != e.CommonComponents() {
		t.Fatalf("a client's lists take %d directions out, want %d", got, e.CommonComponents())
	}
}
