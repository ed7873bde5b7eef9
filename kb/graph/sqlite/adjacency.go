package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/strtab"
)

// adjacency is one client's graph structure in memory — its node keys and,
// per node, its edges out and in — so that Neighbors walks it without a
// query per level (a search's expansion made seven small queries). Each list
// is in the order of the edges_from / edges_to index (edge type, then edge
// key), the order the walk used to read them in. It is loaded on first use
// and kept current by this process's writes; when another process wrote
// (the client's generation moved), it is loaded again.
//
// A key is numbered the first time it is seen (an edge's end, a node) and
// keeps its number until the next load: an arc is two int32s, the edge
// type's number and the other end's, and holds no pointer for the
// collector to follow. At 100,000 documents (157,589 nodes, 731,824 edges)
// the structure with interned strings in its arcs (unique.Handle) took
// about 120 MB of heap, a quarter of it, and the most objects of any.
// An arc holds no edge key either: that is graph.EdgeKey of its type and
// ends.
//
// The keys are in a strtab.Table and the arcs of all nodes in one slice
// (arcLists): the whole structure is a few objects without pointers. With
// a string and two slices of its own per key, at 100,000 documents it was
// 0.4 of the heap's 0.9 million objects, which every collection marked
// while the searches it met waited.
type adjacency struct {
	mu    sync.RWMutex
	gen   int64        // -1: not loaded, or stale
	keys  strtab.Table // by number
	node  []bool       // by number: the key is a node (not only an edge's end)
	out   arcLists     // by number
	in    arcLists     // by number
	types map[string]int32
	names []string // edge types by number
	edges int
}

// arc is an edge seen from one end: its type and its other end, by number.
type arc struct {
	typ, other int32
}

// id returns key's number, numbering it if it has none. A new key is kept
// as a copy (strtab): a written key may be a slice of a larger text (a
// mention), which the structure would otherwise keep in memory.
func (a *adjacency) id(key string) int32 { return a.numbered(a.keys.Add(key)) }

// idBytes is id of key as bytes.
func (a *adjacency) idBytes(key []byte) int32 { return a.numbered(a.keys.AddBytes(key)) }

// numbered makes room for key number n when it is new.
func (a *adjacency) numbered(n uint32, added bool) int32 {
	if added {
		a.node = append(a.node, false)
		a.out.add()
		a.in.add()
	}
	return int32(n)
}

// find returns key's number, if it has one.
func (a *adjacency) find(key string) (int32, bool) {
	n, ok := a.keys.Find(key)
	return int32(n), ok
}

// typBytes is typ of name as bytes.
func (a *adjacency) typBytes(name []byte) int32 {
	if n, ok := a.types[string(name)]; ok {
		return n
	}
	return a.typ(string(name))
}

// typ returns the edge type's number, numbering it if it has none.
func (a *adjacency) typ(name string) int32 {
	if n, ok := a.types[name]; ok {
		return n
	}
	n := int32(len(a.names))
	a.types[name] = n
	a.names = append(a.names, name)
	return n
}

// typeOf and otherOf name an arc's edge type and other end.
func (a *adjacency) typeOf(x arc) string  { return a.names[x.typ] }
func (a *adjacency) otherOf(x arc) string { return a.keys.Str(uint32(x.other)) }

// compareOut orders the arcs out of one node by edge type, then edge key
// (the edges_from index's order): with the type and the start equal, the
// keys compare as their ends do.
func (a *adjacency) compareOut(x, y arc) int {
	return cmp.Or(cmp.Compare(a.typeOf(x), a.typeOf(y)), cmp.Compare(a.otherOf(x), a.otherOf(y)))
}

// compareIn orders the arcs into one node (to) by edge type, then edge key
// (the edges_to index's order): the keys differ in their starts, followed
// by "->" and the same end.
func (a *adjacency) compareIn(to string) func(x, y arc) int {
	return func(x, y arc) int {
		if c := cmp.Compare(a.typeOf(x), a.typeOf(y)); c != 0 || x.other == y.other {
			return c
		}
		return compareJoined([3]string{a.otherOf(x), "->", to}, [3]string{a.otherOf(y), "->", to})
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
	a.keys, a.node, a.out, a.in = strtab.Table{}, nil, arcLists{}, arcLists{}
	a.types, a.names, a.edges = map[string]int32{}, nil, 0
}

func (a *adjacency) hasNode(key string) bool {
	n, ok := a.find(key)
	return ok && a.node[n]
}

func (a *adjacency) addNode(key string) { a.node[a.id(key)] = true }

func (a *adjacency) removeNode(key string) {
	if n, ok := a.find(key); ok {
		a.node[n] = false
	}
}

// arcs returns the arcs out of (or, with in, into) the node key.
func (a *adjacency) arcs(key string, in bool) []arc {
	n, ok := a.find(key)
	switch {
	case !ok:
		return nil
	case in:
		return a.in.list(n)
	}
	return a.out.list(n)
}

func (a *adjacency) addEdge(typ, from, to string) {
	t, f, h := a.typ(typ), a.id(from), a.id(to)
	i, found := slices.BinarySearchFunc(a.out.list(f), arc{t, h}, a.compareOut)
	if found {
		return
	}
	a.out.insert(f, i, arc{t, h})
	j, _ := slices.BinarySearchFunc(a.in.list(h), arc{t, f}, a.compareIn(a.keys.Str(uint32(h))))
	a.in.insert(h, j, arc{t, f})
	a.edges++
}

func (a *adjacency) removeEdge(typ, from, to string) {
	t, okT := a.types[typ]
	f, okF := a.find(from)
	h, okH := a.find(to)
	if !okT || !okF || !okH {
		return
	}
	if a.out.remove(f, arc{t, h}) {
		a.in.remove(h, arc{t, f})
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
	rows, err := tx.QueryContext(ctx, `SELECT type, from_key, to_key FROM edges WHERE client = ?`, g.client)
	if err != nil {
		return err
	}
	defer rows.Close()
	// The edges are numbered first, then each list made at its size.
	type numbered struct{ t, f, h int32 }
	var all []numbered
	var typ, from, to sql.RawBytes // a key numbered before costs no string
	for rows.Next() {
		if err := rows.Scan(&typ, &from, &to); err != nil {
			return err
		}
		all = append(all, numbered{a.typBytes(typ), a.idBytes(from), a.idBytes(to)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	outs, ins := make([]uint32, a.keys.Len()), make([]uint32, a.keys.Len())
	for _, e := range all {
		outs[e.f]++
		ins[e.h]++
	}
	a.out.sized(outs)
	a.in.sized(ins)
	for _, e := range all {
		a.out.push(e.f, arc{e.t, e.h})
		a.in.push(e.h, arc{e.t, e.f})
	}
	a.edges = len(all)
	for n := range int32(a.keys.Len()) {
		slices.SortFunc(a.out.list(n), a.compareOut)
		slices.SortFunc(a.in.list(n), a.compareIn(a.keys.Str(uint32(n))))
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

// arcLists are a list of arcs per node, all in one slice: each node's is
// a span of it, room for more after its arcs. A list that outgrows its
// room moves to the end, at twice the room, as append grows a slice: the
// rooms it left behind are less than the one it has, so the slice is less
// than twice the rooms in use. A load makes each list exactly its size,
// one after another.
type arcLists struct {
	pool []arc
	at   []span // per node
}

type span struct{ off, n, room uint32 }

// add makes an empty list for a new node.
func (l *arcLists) add() { l.at = append(l.at, span{}) }

// list is node n's arcs: a slice of pool, valid until the next change.
func (l *arcLists) list(n int32) []arc {
	s := l.at[n]
	return l.pool[s.off : s.off+s.n : s.off+s.n]
}

// sized makes the lists empty with room for counts[n] arcs each (a load).
func (l *arcLists) sized(counts []uint32) {
	l.at = make([]span, len(counts))
	var off uint32
	for n, c := range counts {
		l.at[n] = span{off: off, room: c}
		off += c
	}
	l.pool = make([]arc, off)
}

// push appends x to node n's list, which has room for it (sized).
func (l *arcLists) push(n int32, x arc) {
	s := &l.at[n]
	l.pool[s.off+s.n] = x
	s.n++
}

// insert puts x at i in node n's list.
func (l *arcLists) insert(n int32, i int, x arc) {
	s := &l.at[n]
	if s.n == s.room {
		room := max(2, 2*s.room)
		off := len(l.pool)
		l.pool = append(l.pool, l.pool[s.off:s.off+s.n]...)
		l.pool = append(l.pool, make([]arc, room-s.n)...)
		s.off, s.room = uint32(off), room
	}
	list := l.pool[s.off : s.off+s.n+1]
	copy(list[i+1:], list[i:])
	list[i] = x
	s.n++
}

// remove takes x out of node n's list, reporting whether it was there.
func (l *arcLists) remove(n int32, x arc) bool {
	s := &l.at[n]
	list := l.pool[s.off : s.off+s.n]
	i := slices.Index(list, x)
	if i < 0 {
		return false
	}
	copy(list[i:], list[i+1:])
	s.n--
	return true
}
