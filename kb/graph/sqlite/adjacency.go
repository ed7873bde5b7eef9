package sqlite

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
	"unique"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
)

// adjacency is one client's graph structure in memory — its node keys and,
// per node, its edges out and in — so that Neighbors walks it without a
// query per level (a search's expansion made seven small queries). Each list
// is in the order of the edges_from / edges_to index (edge type, then edge
// key), the order the walk used to read them in. It is loaded on first use
// and kept current by this process's writes; when another process wrote
// (the client's generation moved), it is loaded again.
//
// Keys are interned (unique.Handle: one pointer each, every copy of a key
// sharing one string) and an arc holds no edge key, which is
// graph.EdgeKey of its type and ends: at 20,000 documents the structure
// took a sixth of the process's heap with a string per key per arc.
type adjacency struct {
	mu      sync.RWMutex
	gen     int64 // -1: not loaded, or stale
	nodes   map[handle]struct{}
	out, in map[handle][]arc
	edges   int
}

type handle = unique.Handle[string]

func intern(s string) handle { return unique.Make(s) }

// arc is an edge seen from one end: its type and its other end.
type arc struct {
	typ, other handle
}

// compareOut orders the arcs out of one node by edge type, then edge key
// (the edges_from index's order): with the type and the start equal, the
// keys compare as their ends do.
func compareOut(a, b arc) int {
	return cmp.Or(cmp.Compare(a.typ.Value(), b.typ.Value()), cmp.Compare(a.other.Value(), b.other.Value()))
}

// compareIn orders the arcs into one node (to) by edge type, then edge key
// (the edges_to index's order): the keys differ in their starts, followed
// by "->" and the same end.
func compareIn(to string) func(a, b arc) int {
	return func(a, b arc) int {
		if c := cmp.Compare(a.typ.Value(), b.typ.Value()); c != 0 || a.other == b.other {
			return c
		}
		return compareJoined([3]string{a.other.Value(), "->", to}, [3]string{b.other.Value(), "->", to})
	}
}

// compareJoined compares the concatenations of a's and b's parts without
// building them.
func compareJoined(a, b [3]string) int {
	i, j := 0, 0 // part
	x, y := 0, 0 // byte within it
	for {
		for i < len(a) && x == len(a[i]) {
			i, x = i+1, 0
		}
		for j < len(b) && y == len(b[j]) {
			j, y = j+1, 0
		}
		switch {
		case i == len(a) && j == len(b):
			return 0
		case i == len(a):
			return -1
		case j == len(b):
			return 1
		}
		if c := cmp.Compare(a[i][x], b[j][y]); c != 0 {
			return c
		}
		x, y = x+1, y+1
	}
}

func (a *adjacency) reset() {
	a.nodes, a.edges = map[handle]struct{}{}, 0
	a.out, a.in = map[handle][]arc{}, map[handle][]arc{}
}

func (a *adjacency) hasNode(key string) bool {
	_, ok := a.nodes[intern(key)]
	return ok
}

func (a *adjacency) addNode(key string) { a.nodes[intern(key)] = struct{}{} }

func (a *adjacency) removeNode(key string) { delete(a.nodes, intern(key)) }

// arcs returns the arcs out of (or, with in, into) the node key.
func (a *adjacency) arcs(key string, in bool) []arc {
	if in {
		return a.in[intern(key)]
	}
	return a.out[intern(key)]
}

func (a *adjacency) addEdge(typ, from, to string) {
	t, f, h := intern(typ), intern(from), intern(to)
	out := a.out[f]
	i, found := slices.BinarySearchFunc(out, arc{t, h}, compareOut)
	if found {
		return
	}
	a.out[f] = slices.Insert(out, i, arc{t, h})
	in := a.in[h]
	j, _ := slices.BinarySearchFunc(in, arc{t, f}, compareIn(to))
	a.in[h] = slices.Insert(in, j, arc{t, f})
	a.edges++
}

func (a *adjacency) removeEdge(typ, from, to string) {
	t, f, h := intern(typ), intern(from), intern(to)
	drop := func(m map[handle][]arc, at handle, x arc) bool {
		n := len(m[at])
		list := slices.DeleteFunc(m[at], func(y arc) bool { return y == x })
		if len(list) == 0 {
			delete(m, at)
		} else {
			m[at] = list
		}
		return len(list) < n
	}
	if drop(a.out, f, arc{t, h}) {
		drop(a.in, h, arc{t, f})
		a.edges--
	}
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
	types := map[string]handle{} // a few: one Make per row is the cost
	typeOf := func(s string) handle {
		h, ok := types[s]
		if !ok {
			h = intern(s)
			types[s] = h
		}
		return h
	}
	rows, err := tx.QueryContext(ctx, `SELECT type, from_key, to_key FROM edges WHERE client = ?`, g.client)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var typ, from, to string
		if err := rows.Scan(&typ, &from, &to); err != nil {
			return err
		}
		t, f, h := typeOf(typ), intern(from), intern(to)
		a.out[f] = append(a.out[f], arc{t, h})
		a.in[h] = append(a.in[h], arc{t, f})
		a.edges++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, list := range a.out {
		slices.SortFunc(list, compareOut)
	}
	for to, list := range a.in {
		slices.SortFunc(list, compareIn(to.Value()))
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
		n := a.edges
		a.mu.RUnlock()
		if report != nil {
			report(c, n, time.Since(start))
		}
	}
	return nil
}
