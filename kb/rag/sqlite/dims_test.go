package sqlite

import (
	"errors"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb/rag"
)

func filled(n int, x float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = x + float32(i%7)
	}
	return v
}

// A client's chunks hold vectors of one dimension: a chunk of another (an
// embedder changed without a wipe) is refused as invalid — permanent, not
// retried — and the index the client has keeps answering, here and in
// another process. Another client may have its own dimension.
func TestUpsertRefusesAnotherDimension(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme")
	if err := x.Upsert(ctx, rag.Chunk{ID: "a", Text: "alpha release notes", SourceURN: "urn:a", Vector: filled(100, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.NearVector(ctx, rag.Query{Vector: filled(100, 1)}); err != nil { // loaded: writes apply to it
		t.Fatal(err)
	}
	for _, dim := range []int{3, 768} {
		err := x.Upsert(ctx, rag.Chunk{ID: "b", Text: "beta", SourceURN: "urn:b", Vector: filled(dim, 2)})
		if !errors.Is(err, rag.ErrInvalid) || !strings.Contains(err.Error(), "the client's chunks have 100") {
			t.Errorf("a %d-dimension chunk into 100: %v, want rag.ErrInvalid naming both", dim, err)
		}
	}
	if err := x.Upsert(ctx, rag.Chunk{ID: "c", Text: "gamma", SourceURN: "urn:c", Vector: filled(100, 3)}); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, s.db.Path) // another process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, st := range []*Store{s, other} {
		hits, err := st.For("acme").NearVector(ctx, rag.Query{Vector: filled(100, 1), Limit: 5})
		if err != nil || len(hits) != 2 {
			t.Fatalf("acme's search: %v, %v", hits, err)
		}
	}
	if err := s.For("beta").Upsert(ctx, rag.Chunk{ID: "a", Text: "alpha", SourceURN: "urn:a", Vector: filled(768, 1)}); err != nil {
		t.Errorf("another client's own dimension: %v", err)
	}
}

// A client whose chunks an earlier version stored with vectors of two
// dimensions cannot be searched as one index: loading it says why and what
// to do, instead of failing on the first odd row.
func TestLoadNamesMixedDimensions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	x := s.For("acme").(*index)
	if err := x.Upsert(ctx, rag.Chunk{ID: "a", Text: "alpha", SourceURN: "urn:a", Vector: filled(100, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.W.ExecContext(ctx, `INSERT INTO chunks (client, id, text, title, graph_refs, source_urn, source_type, kind, node_key, ts, vector)
		VALUES ('acme', 'b', 'beta', '', '[]', 'urn:b', '', '', '', 0, ?)`, encode(filled(768, 2))); err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(ctx, s.db.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	_, err = fresh.For("acme").NearVector(ctx, rag.Query{Vector: filled(100, 1)})
	if err == nil || !strings.Contains(err.Error(), "reprocess the client with a wipe") {
		t.Fatalf("search over mixed dimensions: %v", err)
	}
}
