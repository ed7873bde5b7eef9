package weaviate

import (
	"context"

	"github.com/jervis-dev/jervis/kb/rag"
)

// SetListMax sets how many objects one listing Get asks for, so that a
// test reaches the bound with a few chunks.
func (s *Store) SetListMax(n int) { s.listMax = n }

// BatchOverGRPC writes chunks for client through the store's gRPC
// connection alone (Upsert first creates the class over REST).
func (s *Store) BatchOverGRPC(ctx context.Context, client string, chunks ...rag.Chunk) error {
	return (&index{s: s, client: client}).batchGRPC(ctx, chunks)
}
