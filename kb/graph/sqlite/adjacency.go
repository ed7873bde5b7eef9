package sqlite

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
)

// adjacency is one client's graph structure in memory — its node keys and,
// per node, its edges out and in — so that Neighbors walks it without a
// query per level (a search's expansion made seven small queries). Each list
// is in the order of the edges_from / edges_to index (edge type, then edge
// key), the order the walk used to read them in. It is loaded on first use
// and kept current by this process's writes; when another process wrote
// (the client's generation moved), it is loaded again.
type adjacency struct {
	mu      sync.RWMutex
	gen     int64 // -1: not loaded, or stale
	nodes   map[string]struct{}
	edges   map[string]struct{}
	out, in map[string][]arc
}

// arc is an edge seen from one end.
type arc struct {
	typ, key, other string
}

func compareArcs(a, b arc) int { return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.key, b.key)) }

func (a *adjacency) reset() {
	a.nodes, a.edges = map[string]struct{}{}, map[string]struct{}{}
	a.out, a.in = map[string][]arc{}, map[string][]arc{}
}

func (a *adjacency) addNode(key string) { a.nodes[key] = struct{}{} }

func (a *adjacency) removeNode(key string) { delete(a.nodes, key) }

func (a *adjacency) addEdge(key, typ, from, to string) {
	if _, ok := a.edges[key]; ok {
		return
	}
	a.edges[key] = struct{}{}
	insert := func(m map[string][]arc, at string, x arc) {
		list := m[at]
		i, _ := slices.BinarySearchFunc(list, x, compareArcs)
		m[at] = slices.Insert(list, i, x)
	}
	insert(a.out, from, arc{typ, key, to})
	insert(a.in, to, arc{typ, key, from})
}

func (a *adjacency) removeEdge(key, from, to string) {
	if _, ok := a.edges[key]; !ok {
		return
	}
	delete(a.edges, key)
	drop := func(m map[string][]arc, at string) {
		list := slices.DeleteFunc(m[at], func(x arc) bool { return x.key == key })
		if len(list) == 0 {
			delete(m, at)
		} else {
			m[at] = list
		}
	}
	drop(a.out, from)
	drop(a.in, to)
}

// adjacencyOf returns the client's adjacency (perhaps not loaded).
func (s *Store) adjacencyOf(client string) *adjacency {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adj[client]
	if a == nil {
		a = &adjacency{gen: -1}
		s.adj[client] = a
	}
	return a
}

const generationSQL = `SELECT COALESCE((SELECT gen FROM generations WHERE client = ?), 0)`

// current returns the client's adjacency, loaded at the generation the
// database is at. It is read-locked: call RUnlock.
func (g *clientGraph) current(ctx context.Context) (*adjacency, error) {
	a := g.s.adjacencyOf(g.client)
	var gen int64
	if err := g.db.QueryRow(ctx, generationSQL, g.client).Scan(&gen); err != nil {
		return nil, g.db.Explain("graph generation", err)
	}
	a.mu.RLock()
	if a.gen == gen {
		return a, nil
	}
	a.mu.RUnlock()
	a.mu.Lock()
	if a.gen != gen {
		if err := g.load(ctx, a); err != nil {
			a.mu.Unlock()
			return nil, g.db.Explain("load graph", err)
		}
	}
	a.mu.Unlock()
	a.mu.RLock()
	return a, nil
}

// load reads the client's node keys and edges in one transaction, with the
// generation they are at. a is write-locked.
func (g *clientGraph) load(ctx context.Context, a *adjacency) error {
	tx, err := g.db.R.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	a.gen = -1
	a.reset()
	var gen int64
	if err := tx.QueryRowContext(ctx, generationSQL, g.client).Scan(&gen); err != nil {
		return err
	}
	keys, err := column(ctx, tx, `SELECT key FROM nodes WHERE client = ?`, g.client)
	if err != nil {
		return err
	}
	for _, k := range keys {
		a.addNode(k)
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, type, from_key, to_key FROM edges WHERE client = ?`, g.client)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, typ, from, to string
		if err := rows.Scan(&key, &typ, &from, &to); err != nil {
			return err
		}
		a.edges[key] = struct{}{}
		a.out[from] = append(a.out[from], arc{typ, key, to})
		a.in[to] = append(a.in[to], arc{typ, key, from})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range []map[string][]arc{a.out, a.in} {
		for _, list := range m {
			slices.SortFunc(list, compareArcs)
		}
	}
	a.gen = gen
	return nil
}

// write runs fn in a write transaction that moves the client's generation,
// then applies change to the adjacency if it was current just before
// (otherwise it is left to load again).
func (g *clientGraph) write(ctx context.Context, op string, fn func(tx sqlitedb.Tx) error, change func(a *adjacency)) error {
	var gen int64
	err := g.db.Write(ctx, op, func(tx sqlitedb.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `INSERT INTO generations (client, gen) VALUES (?, 1)
			ON CONFLICT (client) DO UPDATE SET gen = gen + 1 RETURNING gen`, g.client).Scan(&gen)
	})
	if err != nil {
		return err
	}
	a := g.s.adjacencyOf(g.client)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gen == gen-1 && change != nil {
		change(a)
		a.gen = gen
	} else {
		a.gen = -1
	}
	return nil
}

// Preload loads every client's graph structure now rather than at its
// first search; report is told of each client as it is done.
func (s *Store) Preload(ctx context.Context, report func(client string, edges int, took time.Duration)) error {
	clients, err := s.db.Strings(ctx, `SELECT DISTINCT client FROM nodes ORDER BY client`)
	if err != nil {
		return s.db.Explain("preload", err)
	}
	for _, c := range clients {
		g, ok := s.For(c).(*clientGraph)
		if !ok {
			continue
		}
		start := time.Now()
		a, err := g.current(ctx)
		if err != nil {
			return err
		}
		n := len(a.edges)
		a.mu.RUnlock()
		if report != nil {
			report(c, n, time.Since(start))
		}
	}
	return nil
}
