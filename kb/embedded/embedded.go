// Package embedded opens the embedded knowledge base of a data directory:
// the graph (graph.db), the chunks (chunks.db) and the compiled-in GloVe
// embedder, over the pipeline store's alias registry. The binary and the
// tests open it the same way.
package embedded

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	"github.com/jervis-dev/jervis/kb/graph"
	graphsqlite "github.com/jervis-dev/jervis/kb/graph/sqlite"
	"github.com/jervis-dev/jervis/kb/rag"
	ragsqlite "github.com/jervis-dev/jervis/kb/rag/sqlite"
)

// KB is an open knowledge base with the stores under it.
type KB struct {
	*kb.KB
	Graph    graph.Store
	Chunks   rag.Store
	Embedder embed.Embedder
}

// Close closes the graph and chunk stores (not the alias registry).
func (k *KB) Close() error { return errors.Join(k.Chunks.Close(), k.Graph.Close()) }

// Registry is what the knowledge base keeps in the pipeline store: the
// alias registry and the clients' own encoders (store.Store is one).
type Registry interface {
	store.Aliases
	store.Encoders
}

// OpenKB opens the knowledge base in dir with the registry of the pipeline
// store (nil: none).
func OpenKB(ctx context.Context, dir string, reg Registry) (*KB, error) {
	return OpenKBWith(ctx, dir, reg, Backends{})
}

// Backends replace the embedded ones; nil fields keep them.
type Backends struct {
	Graph    graph.Store    // default graph.db in the data directory; closed with the KB
	Chunks   rag.Store      // default chunks.db in the data directory; closed with the KB
	Embedder embed.Embedder // default GloVe
	// VectorLists is the embedded chunk store's rag.sqlite.vector_lists:
	// the chunks from which a client's vectors are kept in lists
	// (approximate search); 0: never. Ignored when Chunks is given.
	VectorLists int
	// Logger is the KB's (kb.Config.Logger).
	Logger *slog.Logger
}

// OpenKBWith is OpenKB with some backends given.
func OpenKBWith(ctx context.Context, dir string, reg Registry, b Backends) (*KB, error) {
	var err error
	g := b.Graph
	if g == nil {
		if g, err = graphsqlite.Open(ctx, filepath.Join(dir, graphsqlite.FileName)); err != nil {
			return nil, err
		}
	}
	c := b.Chunks
	if c == nil {
		s, err := ragsqlite.Open(ctx, filepath.Join(dir, ragsqlite.FileName))
		if err != nil {
			g.Close()
			return nil, err
		}
		s.SetVectorLists(b.VectorLists)
		c = s
	}
	e := b.Embedder
	if e == nil {
		if e, err = glove.New(); err != nil {
			g.Close()
			c.Close()
			return nil, err
		}
	}
	cfg := kb.Config{Graph: g, Chunks: c, Embedder: e, Logger: b.Logger}
	if reg != nil {
		cfg.Aliases, cfg.Encoders = reg, reg
	}
	if _, ok := e.(embed.WordWeigher); !ok { // search's feedback weighs words by GloVe's ranks
		if cfg.Words, err = glove.New(); err != nil {
			g.Close()
			c.Close()
			return nil, err
		}
	}
	return &KB{KB: kb.New(cfg), Graph: g, Chunks: c, Embedder: e}, nil
}

// Open opens everything in dir: the pipeline store and the knowledge base
// over it. Close closes both.
func Open(ctx context.Context, dir string) (*All, error) { return OpenWith(ctx, dir, Backends{}) }

// OpenWith is Open with some knowledge-base backends given.
func OpenWith(ctx context.Context, dir string, b Backends) (*All, error) {
	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	if err != nil {
		return nil, err
	}
	k, err := OpenKBWith(ctx, dir, s, b)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &All{Store: s, KB: k}, nil
}

// All is the pipeline store and the knowledge base of one data directory.
type All struct {
	Store *sqlite.Store
	*KB
}

// Close closes the knowledge base, then the store.
func (a *All) Close() error { return errors.Join(a.KB.Close(), a.Store.Close()) }

// Preload loads the in-memory search structures of every client — the
// graph's, and the chunks' when they are the embedded store — so that no
// user's first search waits for them; it logs each client.
func (k *KB) Preload(ctx context.Context, log *slog.Logger) error {
	if g, ok := k.Graph.(*graphsqlite.Store); ok {
		if err := g.Preload(ctx, func(client string, edges int, took time.Duration) {
			log.Info("graph loaded", "client", client, "edges", edges, "took", took.Round(time.Millisecond))
		}); err != nil {
			return err
		}
	}
	if c, ok := k.Chunks.(*ragsqlite.Store); ok {
		return c.Preload(ctx, func(client string, chunks int, took time.Duration) {
			log.Info("search index loaded", "client", client, "chunks", chunks, "took", took.Round(time.Millisecond))
		})
	}
	return nil
}
