// Package sqlite is the embedded graph backend: nodes, edges and their
// evidence in one SQLite file, with an index on node type and on edge
// endpoints. Traversals (Neighbors, ShortestPath) are breadth first, one
// indexed query per level, stopping as soon as they have what was asked for:
// a recursive CTE cannot stop inserting a hub's neighbours into its queue,
// which made depth-2 expansion 10x slower at 100,000 chunks.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/graph"
)

// FileName is the database file in a data directory.
const FileName = "graph.db"

var migrations = []string{`
CREATE TABLE nodes (
	client     TEXT NOT NULL,
	key        TEXT NOT NULL,
	type       TEXT NOT NULL,
	props      TEXT NOT NULL DEFAULT '{}',
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	PRIMARY KEY (client, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX nodes_type ON nodes (client, type);

CREATE TABLE node_chunks (
	client   TEXT NOT NULL,
	key      TEXT NOT NULL,
	chunk_id TEXT NOT NULL,
	PRIMARY KEY (client, key, chunk_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX node_chunks_chunk ON node_chunks (client, chunk_id);

CREATE TABLE edges (
	client     TEXT NOT NULL,
	key        TEXT NOT NULL,
	type       TEXT NOT NULL,
	from_key   TEXT NOT NULL,
	to_key     TEXT NOT NULL,
	props      TEXT NOT NULL DEFAULT '{}',
	confidence REAL NOT NULL,
	origin     TEXT NOT NULL,
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	PRIMARY KEY (client, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX edges_from ON edges (client, from_key, type);
CREATE INDEX edges_to ON edges (client, to_key, type);

CREATE TABLE edge_evidence (
	client   TEXT NOT NULL,
	edge_key TEXT NOT NULL,
	chunk_id TEXT NOT NULL,
	PRIMARY KEY (client, edge_key, chunk_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX edge_evidence_chunk ON edge_evidence (client, chunk_id);
`,
	// 2: a generation per client, moved by every write (adjacency.go).
	`CREATE TABLE generations (client TEXT PRIMARY KEY, gen INTEGER NOT NULL) STRICT;`,
	// 3: nodes and edges in rowid tables, their keys in a unique index. A
	// WITHOUT ROWID table keeps whole rows in its interior pages; rows of
	// a few hundred bytes (props, link URLs in keys) left it a few per
	// page, and each key inserted at random rewrote several pages, and
	// its secondary indexes carried the whole key as the row's locator.
	`
CREATE TABLE nodes_by_rowid (
	client     TEXT NOT NULL,
	key        TEXT NOT NULL,
	type       TEXT NOT NULL,
	props      TEXT NOT NULL DEFAULT '{}',
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	UNIQUE (client, key)
) STRICT;
INSERT INTO nodes_by_rowid (client, key, type, props, first_seen, last_seen)
	SELECT client, key, type, props, first_seen, last_seen FROM nodes ORDER BY client, key;
DROP TABLE nodes;
ALTER TABLE nodes_by_rowid RENAME TO nodes;
CREATE INDEX nodes_type ON nodes (client, type);

CREATE TABLE edges_by_rowid (
	client     TEXT NOT NULL,
	key        TEXT NOT NULL,
	type       TEXT NOT NULL,
	from_key   TEXT NOT NULL,
	to_key     TEXT NOT NULL,
	props      TEXT NOT NULL DEFAULT '{}',
	confidence REAL NOT NULL,
	origin     TEXT NOT NULL,
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	UNIQUE (client, key)
) STRICT;
INSERT INTO edges_by_rowid (client, key, type, from_key, to_key, props, confidence, origin, first_seen, last_seen)
	SELECT client, key, type, from_key, to_key, props, confidence, origin, first_seen, last_seen FROM edges ORDER BY client, key;
DROP TABLE edges;
ALTER TABLE edges_by_rowid RENAME TO edges;
CREATE INDEX edges_from ON edges (client, from_key, type);
CREATE INDEX edges_to ON edges (client, to_key, type);
`,
	// 4: edges_from holds to_key too, so that loading a client's adjacency
	// (type, from_key, to_key of every edge: adjacency.go) reads the index
	// alone, as it read the WITHOUT ROWID table, instead of looking each
	// edge up by rowid (at 732,000 edges 1.4 s became 2.4 s).
	`DROP INDEX edges_from;
CREATE INDEX edges_from ON edges (client, from_key, type, to_key);`,
	// 5: no index by chunk ID. RemoveEvidence finds a chunk's links from
	// the nodes it names (graph.Held); the two indexes were written with
	// every chunk link and read by nothing else.
	`DROP INDEX node_chunks_chunk;
DROP INDEX edge_evidence_chunk;`,
	// 6: the merges MergeNode made (alias → canonical), which RemoveEvidence
	// follows from the keys a chunk was written to: a node merged since
	// holds what its alias held, whatever the alias registry says now.
	`CREATE TABLE merged (
	client    TEXT NOT NULL,
	alias     TEXT NOT NULL,
	canonical TEXT NOT NULL,
	PRIMARY KEY (client, alias)
) STRICT, WITHOUT ROWID;`,
	// 7: an edge's first evidence chunk in its own row (putEdge): nearly
	// every edge has one, and its edge_evidence row was a random-keyed
	// B-tree entry of its own. NULL: the edge's evidence is all in
	// edge_evidence, as every edge written before this had it.
	`ALTER TABLE edges ADD COLUMN chunk TEXT;`,
}

// Store holds every client's graph in one database.
type Store struct {
	db *sqlitedb.DB

	mu  sync.Mutex
	adj map[string]*adjacency // per client
}

var _ graph.Store = (*Store)(nil)

// Open opens (creating when missing) the graph database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: migrations})
	if err != nil {
		return nil, err
	}
	return &Store{db: db, adj: map[string]*adjacency{}}, nil
}

// For implements graph.Store.
func (s *Store) For(client string) graph.Graph { return &clientGraph{s: s, db: s.db, client: client} }

// Ping implements graph.Store.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// Close implements graph.Store.
func (s *Store) Close() error { return s.db.Close() }

// clientGraph is one client's view; every statement filters on client.
type clientGraph struct {
	s      *Store
	db     *sqlitedb.DB
	client string
}

func propsJSON(p map[string]any) (string, error) {
	if len(p) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

func seen(t time.Time, now time.Time) int64 {
	if t.IsZero() {
		return sqlitedb.Micros(now)
	}
	return sqlitedb.Micros(t)
}

// UpsertNodes implements graph.Graph.
func (g *clientGraph) UpsertNodes(ctx context.Context, nodes ...graph.Node) error {
	for _, n := range nodes {
		if err := graph.ValidateNode(n); err != nil {
			return err
		}
	}
	now := time.Now()
	return g.write(ctx, "upsert nodes", func(tx sqlitedb.Tx) error {
		for _, n := range nodes {
			props, err := propsJSON(n.Props)
			if err != nil {
				return fmt.Errorf("%w: node %s props: %v", graph.ErrInvalid, n.Key, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (client, key, type, props, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (client, key) DO UPDATE SET props = json_patch(nodes.props, excluded.props),
					first_seen = min(nodes.first_seen, excluded.first_seen), last_seen = max(nodes.last_seen, excluded.last_seen)`,
				g.client, n.Key, n.Type, props, seen(n.FirstSeen, now), seen(n.LastSeen, now)); err != nil {
				return err
			}
			if err := g.link(ctx, tx, "node_chunks", "key", n.Key, n.RAGChunks); err != nil {
				return err
			}
		}
		return nil
	}, func(a *adjacency) {
		for _, n := range nodes {
			a.addNode(n.Key)
		}
	})
}

// insertEdge writes an edge that is not there yet, and updateEdge merges
// one into the edge that is: props patched, the higher confidence with its
// origin, the wider span of sightings; the row's evidence chunk kept, or
// set when it has none.
const (
	insertEdge = `INSERT INTO edges (client, key, type, from_key, to_key, props, confidence, origin, first_seen, last_seen, chunk)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client, key) DO NOTHING`
	updateEdge = `UPDATE edges SET props = json_patch(props, ?2), origin = CASE WHEN ?3 > confidence THEN ?4 ELSE origin END,
	confidence = max(confidence, ?3), first_seen = min(first_seen, ?5), last_seen = max(last_seen, ?6), chunk = coalesce(chunk, ?7)
	WHERE client = ?8 AND key = ?1`
)

// putEdge upserts e (in tx) with its evidence. An edge's evidence is the
// chunk its row holds and its edge_evidence rows: a new edge's first chunk
// goes in its row, the others in rows; an edge already there gets rows for
// every chunk but the one its row holds. On the dev mailing list an
// edge_evidence row for each of its 14 edges a message cost 8–10 % of the
// throughput (BENCHMARKS.md, forty-seventh round). Two statements, not an
// upsert with RETURNING: that cost more than the row it saved.
func (g *clientGraph) putEdge(ctx context.Context, tx sqlitedb.Tx, e graph.Edge, props string, first, last int64) error {
	key := e.Key()
	var chunk any // none: ValidateEdge refuses it, but an edge MergeNode moves is as stored
	if len(e.EvidenceChunkIDs) > 0 {
		chunk = e.EvidenceChunkIDs[0]
	}
	res, err := tx.ExecContext(ctx, insertEdge, g.client, key, e.Type, e.From, e.To, props, e.Confidence, e.Origin, first, last, chunk)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 1 {
		if len(e.EvidenceChunkIDs) == 0 {
			return nil
		}
		head := e.EvidenceChunkIDs[0]
		return g.link(ctx, tx, "edge_evidence", "edge_key", key, slices.DeleteFunc(slices.Clone(e.EvidenceChunkIDs), func(c string) bool { return c == head }))
	}
	if _, err := tx.ExecContext(ctx, updateEdge, key, props, e.Confidence, e.Origin, first, last, chunk, g.client); err != nil {
		return err
	}
	if len(e.EvidenceChunkIDs) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO edge_evidence (client, edge_key, chunk_id) SELECT ?1, ?2, value FROM json_each(?3)
		WHERE value IS NOT (SELECT chunk FROM edges WHERE client = ?1 AND key = ?2) ON CONFLICT DO NOTHING`, g.client, key, sqlitedb.JSONList(e.EvidenceChunkIDs))
	return err
}

// UpsertEdges implements graph.Graph.
func (g *clientGraph) UpsertEdges(ctx context.Context, edges ...graph.Edge) error {
	for _, e := range edges {
		if err := graph.ValidateEdge(e); err != nil {
			return err
		}
	}
	now := time.Now()
	ends := make([]string, 0, 2*len(edges))
	for _, e := range edges {
		ends = append(ends, e.From, e.To)
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	return g.write(ctx, "upsert edges", func(tx sqlitedb.Tx) error {
		// Every endpoint must be a node: one read for all of them.
		found, err := column(ctx, tx, `SELECT key FROM nodes WHERE client = ? AND key IN (SELECT value FROM json_each(?))`, g.client, sqlitedb.JSONList(ends))
		if err != nil {
			return err
		}
		if len(found) < len(ends) {
			have := make(map[string]bool, len(found))
			for _, k := range found {
				have[k] = true
			}
			for _, e := range edges {
				for _, k := range []string{e.From, e.To} {
					if !have[k] {
						return fmt.Errorf("edge %s: endpoint %s: %w", e.Key(), k, graph.ErrNotFound)
					}
				}
			}
		}
		for _, e := range edges {
			props, err := propsJSON(e.Props)
			if err != nil {
				return fmt.Errorf("%w: edge %s props: %v", graph.ErrInvalid, e.Key(), err)
			}
			if err := g.putEdge(ctx, tx, e, props, seen(e.FirstSeen, now), seen(e.LastSeen, now)); err != nil {
				return err
			}
		}
		return nil
	}, func(a *adjacency) {
		for _, e := range edges {
			a.addEdge(e.Type, e.From, e.To)
		}
	})
}

// link writes the rows that tie a node or an edge (key, in table's column)
// to chunks, those it has already left as they are. Several chunks go in one
// statement, their IDs as a JSON array (a statement a row was 15–17 µs of
// each row's cost in a profile of the dev Jira corpus, 140,000 rows).
func (g *clientGraph) link(ctx context.Context, tx sqlitedb.Tx, table, column, key string, chunks []string) error {
	switch len(chunks) {
	case 0:
		return nil
	case 1:
		_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (client, `+column+`, chunk_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, g.client, key, chunks[0])
		return err
	}
	// WHERE true: without it SQLite would read ON CONFLICT as a join's ON.
	_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (client, `+column+`, chunk_id) SELECT ?, ?, value FROM json_each(?) WHERE true ON CONFLICT DO NOTHING`, g.client, key, sqlitedb.JSONList(chunks))
	return err
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

const nodeColumns = `key, type, props, first_seen, last_seen`

func (g *clientGraph) nodes(ctx context.Context, q querier, keys []string) ([]graph.Node, error) {
	return g.nodesWhere(ctx, q, "", `key IN (SELECT value FROM json_each(?))`, sqlitedb.JSONList(keys))
}

// nodesWhere loads the nodes matching where (with args); extra columns
// (one JSON array of chunk IDs, or none) follow the node's own.
func (g *clientGraph) nodesWhere(ctx context.Context, q querier, chunks, where string, args ...any) ([]graph.Node, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+nodeColumns+cmp.Or(chunks, ", NULL")+` FROM nodes WHERE client = ? AND `+where, append([]any{g.client}, args...)...)
	if err != nil {
		return nil, g.db.Explain("get nodes", err)
	}
	defer rows.Close()
	var out []graph.Node
	for rows.Next() {
		var n graph.Node
		var props string
		var chunkIDs sql.NullString
		var first, last int64
		if err := rows.Scan(&n.Key, &n.Type, &props, &first, &last, &chunkIDs); err != nil {
			return nil, err
		}
		if props != "{}" { // most nodes have none
			if err := json.Unmarshal([]byte(props), &n.Props); err != nil {
				return nil, fmt.Errorf("node %s props: %w", n.Key, err)
			}
		}
		if len(n.Props) == 0 {
			n.Props = nil
		}
		if chunkIDs.Valid {
			if n.RAGChunks, err = sqlitedb.DecodeJSONList(chunkIDs.String); err != nil {
				return nil, fmt.Errorf("node %s chunks: %w", n.Key, err)
			}
		}
		n.FirstSeen, n.LastSeen = sqlitedb.Time(first), sqlitedb.Time(last)
		out = append(out, n)
	}
	return out, rows.Err()
}

// ListNodes implements graph.Graph.
func (g *clientGraph) ListNodes(ctx context.Context, q graph.NodeQuery) ([]graph.Node, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	where, args := []string{"key > ?"}, []any{q.After}
	if q.Type != "" {
		where, args = append(where, "type = ?"), append(args, q.Type)
	}
	if q.Prefix != "" {
		where, args = append(where, `key >= ? AND substr(key, 1, length(?)) = ?`), append(args, q.Prefix, q.Prefix, q.Prefix)
	}
	return g.nodesWhere(ctx, g.db.Reads(), `, (SELECT json_group_array(chunk_id) FROM (SELECT chunk_id FROM node_chunks c WHERE c.client = nodes.client AND c.key = nodes.key ORDER BY chunk_id))`,
		strings.Join(where, " AND ")+` ORDER BY key LIMIT ?`, append(args, q.Limit)...)
}

// Node implements graph.Graph.
func (g *clientGraph) Node(ctx context.Context, key string) (graph.Node, error) {
	ns, err := g.nodes(ctx, g.db.Reads(), []string{key})
	if err != nil {
		return graph.Node{}, err
	}
	if len(ns) == 0 {
		return graph.Node{}, fmt.Errorf("node %s: %w", key, graph.ErrNotFound)
	}
	n := ns[0]
	rows, err := g.db.Query(ctx, `SELECT chunk_id FROM node_chunks WHERE client = ? AND key = ? ORDER BY chunk_id`, g.client, key)
	if err != nil {
		return n, g.db.Explain("get node", err)
	}
	defer rows.Close()
	n.RAGChunks = []string{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return n, err
		}
		n.RAGChunks = append(n.RAGChunks, c)
	}
	return n, rows.Err()
}

// edges loads edges matching where (with args) and their evidence. from is
// the table clause, so callers can pin an index.
func (g *clientGraph) edges(ctx context.Context, q querier, from, where string, args ...any) ([]graph.Edge, error) {
	rows, err := q.QueryContext(ctx, `SELECT key, type, from_key, to_key, props, confidence, origin, first_seen, last_seen,
		(SELECT json_group_array(chunk_id) FROM (SELECT edges.chunk AS chunk_id WHERE edges.chunk IS NOT NULL
			UNION SELECT chunk_id FROM edge_evidence v WHERE v.client = edges.client AND v.edge_key = edges.key ORDER BY chunk_id))
		FROM `+from+` WHERE client = ? AND `+where, append([]any{g.client}, args...)...)
	if err != nil {
		return nil, g.db.Explain("get edges", err)
	}
	defer rows.Close()
	var out []graph.Edge
	for rows.Next() {
		var e graph.Edge
		var key, props, evidence string
		var first, last int64
		if err := rows.Scan(&key, &e.Type, &e.From, &e.To, &props, &e.Confidence, &e.Origin, &first, &last, &evidence); err != nil {
			return nil, err
		}
		if props != "{}" { // most edges have none
			if err := json.Unmarshal([]byte(props), &e.Props); err != nil {
				return nil, fmt.Errorf("edge %s props: %w", key, err)
			}
		}
		if len(e.Props) == 0 {
			e.Props = nil
		}
		if e.EvidenceChunkIDs, err = sqlitedb.DecodeJSONList(evidence); err != nil {
			return nil, fmt.Errorf("edge %s evidence: %w", key, err)
		}
		e.FirstSeen, e.LastSeen = sqlitedb.Time(first), sqlitedb.Time(last)
		out = append(out, e)
	}
	// Sorted here: ORDER BY key would tempt the planner to walk the primary
	// key over every edge of the client instead of using the from/to indexes.
	slices.SortFunc(out, func(a, b graph.Edge) int { return strings.Compare(a.Key(), b.Key()) })
	return out, rows.Err()
}

// Edge implements graph.Graph.
func (g *clientGraph) Edge(ctx context.Context, key string) (graph.Edge, error) {
	es, err := g.edges(ctx, g.db.Reads(), "edges", `key = ?`, key)
	if err != nil {
		return graph.Edge{}, err
	}
	if len(es) == 0 {
		return graph.Edge{}, fmt.Errorf("edge %s: %w", key, graph.ErrNotFound)
	}
	return es[0], nil
}

// Neighbors implements graph.Graph breadth first, one indexed query per
// level and direction, each limited to what is still wanted: the walk stops
// as soon as q.Limit nodes are reached, so a hub (a person in thousands of
// emails) costs no more than the nodes it contributes. Within a level, nodes
// come in index order (by the key they were reached from).
//
// An earlier version used one recursive CTE; it had to put a hub's whole
// neighbourhood in the CTE's queue before LIMIT applied, which made
// depth-2 expansion at 100,000 chunks take 13 ms instead of about 1.
func (g *clientGraph) Neighbors(ctx context.Context, q graph.NeighborQuery) (graph.Neighborhood, error) {
	var hood graph.Neighborhood
	if err := q.Validate(); err != nil {
		return hood, err
	}
	adj, err := g.current(ctx)
	if err != nil {
		return hood, err
	}
	var start []string
	for _, k := range q.Start {
		if adj.hasNode(k) && !slices.Contains(start, k) {
			start = append(start, k)
		}
	}
	// Within a level: edges out of the frontier, then into it; by frontier
	// key, then edge type and key (the adjacency's order).
	keys, depth, _ := graph.Walk(q, start, func(frontier []string, dir graph.Direction) iter.Seq2[graph.Step, error] {
		return func(yield func(graph.Step, error) bool) {
			for _, f := range frontier {
				for _, x := range adj.arcs(f, dir == graph.In) {
					if !yield(graph.Step{Type: adj.typeOf(x), Other: adj.otherOf(x)}, nil) {
						return
					}
				}
			}
		}
	})
	// The edges among the nodes reached, from the same structure: read by
	// key, not by scanning every edge out of each node. The nodes reached
	// are looked up by number: a hub reached has thousands of arcs, and
	// hashing each one's other end by its key was a sixth of expansion.
	reached := make(map[int32]struct{}, len(keys))
	for _, k := range keys {
		if n, ok := adj.find(k); ok {
			reached[n] = struct{}{}
		}
	}
	var edgeKeys []string
	for _, k := range keys {
		for _, x := range adj.arcs(k, false) {
			if _, ok := reached[x.other]; ok && (len(q.EdgeTypes) == 0 || slices.Contains(q.EdgeTypes, adj.typeOf(x))) {
				edgeKeys = append(edgeKeys, graph.EdgeKey(adj.typeOf(x), k, adj.otherOf(x)))
			}
		}
	}
	adj.mu.RUnlock()
	if len(keys) == 0 {
		return hood, nil
	}
	// The nodes and the edges are read at once, each on a connection of
	// the read pool: a search waits for the longer of the two, not both.
	var edgesErr error
	edgesRead := make(chan struct{})
	go func() {
		defer close(edgesRead)
		if len(edgeKeys) > 0 {
			hood.Edges, edgesErr = g.edges(ctx, g.db.Reads(), "edges", `key IN (SELECT value FROM json_each(?))`, sqlitedb.JSONList(edgeKeys))
		}
	}()
	ns, err := g.nodes(ctx, g.db.Reads(), keys)
	<-edgesRead
	if err != nil || edgesErr != nil {
		return graph.Neighborhood{}, errors.Join(err, edgesErr)
	}
	for _, n := range ns {
		hood.Nodes = append(hood.Nodes, graph.Visit{Node: n, Depth: depth[n.Key]})
	}
	graph.SortVisits(hood.Nodes)
	return hood, nil
}

// ShortestPath implements graph.Graph: breadth-first, one query per level.
func (g *clientGraph) ShortestPath(ctx context.Context, from, to string, maxDepth int) (graph.Path, error) {
	var p graph.Path
	if maxDepth <= 0 || maxDepth > graph.MaxDepth*2 {
		return p, fmt.Errorf("%w: maxDepth: %d is not 1..%d", graph.ErrInvalid, maxDepth, graph.MaxDepth*2)
	}
	start, err := g.nodes(ctx, g.db.Reads(), []string{from, to})
	if err != nil {
		return p, err
	}
	if len(start) < 2 && from != to || len(start) == 0 {
		return p, fmt.Errorf("path %s -> %s: endpoint: %w", from, to, graph.ErrNotFound)
	}
	type step struct{ prev, edge string }
	parent := map[string]step{from: {}}
	frontier := []string{from}
	for depth := 0; depth < maxDepth && len(frontier) > 0 && from != to; depth++ {
		set := sqlitedb.JSONList(frontier)
		rows, err := g.db.Query(ctx, `SELECT key, from_key, to_key FROM edges INDEXED BY edges_from WHERE client = ? AND from_key IN (SELECT value FROM json_each(?))
			UNION ALL SELECT key, from_key, to_key FROM edges INDEXED BY edges_to WHERE client = ? AND to_key IN (SELECT value FROM json_each(?)) ORDER BY 1`, g.client, set, g.client, set)
		if err != nil {
			return p, g.db.Explain("shortest path", err)
		}
		var next []string
		inFrontier := map[string]bool{}
		for _, f := range frontier {
			inFrontier[f] = true
		}
		for rows.Next() {
			var key, a, b string
			if err := rows.Scan(&key, &a, &b); err != nil {
				rows.Close()
				return p, err
			}
			for _, hop := range [][2]string{{a, b}, {b, a}} {
				if !inFrontier[hop[0]] {
					continue
				}
				if _, seen := parent[hop[1]]; !seen {
					parent[hop[1]] = step{prev: hop[0], edge: key}
					next = append(next, hop[1])
				}
			}
		}
		rows.Close()
		if _, found := parent[to]; found {
			break
		}
		frontier = next
	}
	if _, found := parent[to]; !found {
		return p, fmt.Errorf("path %s -> %s within %d: %w", from, to, maxDepth, graph.ErrNotFound)
	}
	var keys, edgeKeys []string
	for k := to; ; k = parent[k].prev {
		keys = append(keys, k)
		if k == from {
			break
		}
		edgeKeys = append(edgeKeys, parent[k].edge)
	}
	slices.Reverse(keys)
	slices.Reverse(edgeKeys)
	ns, err := g.nodes(ctx, g.db.Reads(), keys)
	if err != nil {
		return p, err
	}
	byKey := map[string]graph.Node{}
	for _, n := range ns {
		byKey[n.Key] = n
	}
	for _, k := range keys {
		p.Nodes = append(p.Nodes, byKey[k])
	}
	es, err := g.edges(ctx, g.db.Reads(), "edges", `key IN (SELECT value FROM json_each(?))`, sqlitedb.JSONList(edgeKeys))
	if err != nil {
		return p, err
	}
	byEdge := map[string]graph.Edge{}
	for _, e := range es {
		byEdge[e.Key()] = e
	}
	for _, k := range edgeKeys {
		p.Edges = append(p.Edges, byEdge[k])
	}
	return p, nil
}

// Drop implements graph.Graph.
func (g *clientGraph) Drop(ctx context.Context) error {
	return g.write(ctx, "drop graph", func(tx sqlitedb.Tx) error {
		for _, table := range []string{"edge_evidence", "node_chunks", "edges", "nodes", "merged"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE client = ?`, g.client); err != nil {
				return err
			}
		}
		return nil
	}, (*adjacency).reset)
}

// RemoveEvidence implements graph.Graph. Where each chunk may be held is
// found in the adjacency (holders); the chunk links are then deleted by
// their primary keys, in one transaction with what they leave bare.
func (g *clientGraph) RemoveEvidence(ctx context.Context, held []graph.Held) (graph.Removed, error) {
	var r graph.Removed
	if len(held) == 0 {
		return r, nil
	}
	nodeLinks, edgeLinks, err := g.holders(ctx, held)
	if err != nil {
		return r, err
	}
	var deadEdges [][3]string // type, from, to
	var deadNodes []string
	err = g.write(ctx, "remove evidence", func(tx sqlitedb.Tx) error {
		r = graph.Removed{}
		deadEdges, deadNodes = nil, nil
		edgeKeys, err := unlink(ctx, tx, "edge_evidence", "edge_key", g.client, edgeLinks)
		if err != nil {
			return err
		}
		inline, err := unlinkInline(ctx, tx, g.client, edgeLinks)
		if err != nil {
			return err
		}
		edgeKeys = append(edgeKeys, inline...)
		slices.Sort(edgeKeys)
		edgeKeys = slices.Compact(edgeKeys)
		nodeKeys, err := unlink(ctx, tx, "node_chunks", "key", g.client, nodeLinks)
		if err != nil {
			return err
		}
		// Edges left without evidence go, and their endpoints may be orphans.
		rows, err := tx.QueryContext(ctx, `SELECT key, type, from_key, to_key FROM edges WHERE client = ? AND key IN (SELECT value FROM json_each(?))
			AND chunk IS NULL AND NOT EXISTS (SELECT 1 FROM edge_evidence v WHERE v.client = edges.client AND v.edge_key = edges.key)`, g.client, sqlitedb.JSONList(edgeKeys))
		if err != nil {
			return err
		}
		var dead []string
		candidates := nodeKeys
		for rows.Next() {
			var k, typ, from, to string
			if err := rows.Scan(&k, &typ, &from, &to); err != nil {
				rows.Close()
				return err
			}
			dead = append(dead, k)
			deadEdges = append(deadEdges, [3]string{typ, from, to})
			candidates = append(candidates, from, to)
		}
		rows.Close()
		if _, err := tx.ExecContext(ctx, `DELETE FROM edges WHERE client = ? AND key IN (SELECT value FROM json_each(?))`, g.client, sqlitedb.JSONList(dead)); err != nil {
			return err
		}
		r.EdgesDeleted, r.EdgesUpdated = len(dead), len(edgeKeys)-len(dead)
		ends, err := column(ctx, tx, `SELECT DISTINCT value FROM json_each(?) j
			WHERE NOT EXISTS (SELECT 1 FROM edges e INDEXED BY edges_from WHERE e.client = ? AND e.from_key = j.value)
			AND NOT EXISTS (SELECT 1 FROM edges e INDEXED BY edges_to WHERE e.client = ? AND e.to_key = j.value)`, sqlitedb.JSONList(candidates), g.client, g.client)
		if err != nil {
			return err
		}
		for _, k := range ends {
			res, err := tx.ExecContext(ctx, `DELETE FROM nodes WHERE client = ? AND key = ? AND NOT EXISTS
				(SELECT 1 FROM node_chunks WHERE client = ? AND key = ?)`, g.client, k, g.client, k)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			r.NodesDeleted += int(n)
			if n > 0 {
				deadNodes = append(deadNodes, k)
			}
		}
		return nil
	}, func(a *adjacency) {
		for _, e := range deadEdges {
			a.removeEdge(e[0], e[1], e[2])
		}
		for _, k := range deadNodes {
			a.removeNode(k)
		}
	})
	return r, err
}

// holders returns the chunk links (key, chunk ID) each chunk of held may
// have: to each of its nodes and the nodes they were merged into
// (mergedInto), and to the edges between two of them or of its own node
// (Nodes[0], and what it was merged into), read from the adjacency. Only a
// write of this chunk's source could add one meanwhile, and that is the
// caller's.
func (g *clientGraph) holders(ctx context.Context, held []graph.Held) (nodes, edges []string, err error) {
	into, err := g.mergedInto(ctx, held)
	if err != nil {
		return nil, nil, err
	}
	a, err := g.current(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer a.mu.RUnlock()
	for _, h := range held {
		if len(h.Nodes) == 0 {
			continue
		}
		// The chunk's own node and what it was merged into, then the rest.
		keys := append([]string{h.Nodes[0]}, into[h.Nodes[0]]...)
		owned := len(keys)
		for _, k := range h.Nodes[1:] {
			keys = append(keys, k)
			keys = append(keys, into[k]...)
		}
		in := make(map[int32]bool, len(keys))
		own := make(map[int32]bool, owned)
		for i, k := range keys {
			if i >= owned && slices.Contains(keys[:i], k) {
				continue
			}
			nodes = append(nodes, k, h.ChunkID)
			if n, ok := a.find(k); ok {
				in[n] = true
				if i < owned {
					own[n] = true
				}
			}
		}
		for n := range in {
			from := a.keys.Str(uint32(n))
			for _, x := range a.out.list(n) {
				if own[n] || in[x.other] {
					edges = append(edges, graph.EdgeKey(a.typeOf(x), from, a.otherOf(x)), h.ChunkID)
				}
			}
		}
		for n := range own {
			to := a.keys.Str(uint32(n))
			for _, x := range a.in.list(n) {
				if !in[x.other] { // from a node of h: found above
					edges = append(edges, graph.EdgeKey(a.typeOf(x), a.otherOf(x), to), h.ChunkID)
				}
			}
		}
	}
	return nodes, edges, nil
}

// mergedInto returns, for each key of held's nodes that MergeNode merged
// into another, the keys it was merged into (a chain, followed 8 deep).
func (g *clientGraph) mergedInto(ctx context.Context, held []graph.Held) (map[string][]string, error) {
	var keys []string
	for _, h := range held {
		keys = append(keys, h.Nodes...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	rows, err := g.db.Query(ctx, `WITH RECURSIVE m(start, key, depth) AS (
			SELECT value, value, 0 FROM json_each(?)
			UNION SELECT m.start, merged.canonical, m.depth + 1 FROM m JOIN merged ON merged.client = ? AND merged.alias = m.key WHERE m.depth < 8)
		SELECT start, key FROM m WHERE depth > 0 ORDER BY start, depth`, sqlitedb.JSONList(keys), g.client)
	if err != nil {
		return nil, g.db.Explain("merged keys", err)
	}
	defer rows.Close()
	into := map[string][]string{}
	for rows.Next() {
		var start, key string
		if err := rows.Scan(&start, &key); err != nil {
			return nil, err
		}
		if key != start && !slices.Contains(into[start], key) {
			into[start] = append(into[start], key)
		}
	}
	return into, rows.Err()
}

// unlink deletes the chunk links of table named by links (key, chunk ID,
// flattened) by their primary key and returns the keys that had one.
func unlink(ctx context.Context, tx sqlitedb.Tx, table, keyColumn, client string, links []string) ([]string, error) {
	if len(links) == 0 {
		return nil, nil
	}
	keys, err := column(ctx, tx, `DELETE FROM `+table+` WHERE client = ? AND (`+keyColumn+`, chunk_id) IN
		(SELECT value ->> 0, value ->> 1 FROM json_each(?)) RETURNING `+keyColumn, client, pairList(links))
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// unlinkInline clears the chunk an edge's row holds where links (edge key,
// chunk ID, flattened) name it, and returns those edges' keys.
func unlinkInline(ctx context.Context, tx sqlitedb.Tx, client string, links []string) ([]string, error) {
	if len(links) == 0 {
		return nil, nil
	}
	return column(ctx, tx, `UPDATE edges SET chunk = NULL WHERE client = ? AND (key, chunk) IN
		(SELECT value ->> 0, value ->> 1 FROM json_each(?)) RETURNING key`, client, pairList(links))
}

// pairList is links (key, chunk ID, flattened) as a JSON array of [key,
// chunk ID] pairs, each as sqlitedb.JSONList writes it: every byte of a key
// kept (encoding/json would not).
func pairList(links []string) string {
	var list strings.Builder
	list.WriteByte('[')
	for i := 0; i < len(links); i += 2 {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(sqlitedb.JSONList(links[i : i+2]))
	}
	list.WriteByte(']')
	return list.String()
}

func column(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// CountByType implements graph.Graph.
func (g *clientGraph) CountByType(ctx context.Context) (map[string]int, error) {
	return g.count(ctx, "nodes")
}

// CountEdgesByType implements graph.Graph.
func (g *clientGraph) CountEdgesByType(ctx context.Context) (map[string]int, error) {
	return g.count(ctx, "edges")
}

func (g *clientGraph) count(ctx context.Context, table string) (map[string]int, error) {
	rows, err := g.db.Query(ctx, `SELECT type, count(*) FROM `+table+` WHERE client = ? GROUP BY type`, g.client)
	if err != nil {
		return nil, g.db.Explain("count nodes", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var t string
		var n int
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, rows.Err()
}

// MergeNode implements graph.Graph, in one transaction.
func (g *clientGraph) MergeNode(ctx context.Context, alias, canonical string) (graph.Merged, error) {
	var m graph.Merged
	if alias == canonical || alias == "" || canonical == "" {
		return m, fmt.Errorf("%w: merge %q into %q: two different keys are needed", graph.ErrInvalid, alias, canonical)
	}
	// Most calls find nothing to merge (a pass repeats every alias): a read
	// says so without a write transaction.
	var one int
	switch err := g.db.QueryRow(ctx, `SELECT 1 FROM nodes WHERE client = ? AND key = ?`, g.client, alias).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return m, nil
	case err != nil:
		return m, g.db.Explain("merge node", err)
	}
	var moved [][2]graph.Edge // old, new (new.From == "" when dropped)
	err := g.write(ctx, "merge node", func(tx sqlitedb.Tx) error {
		m, moved = graph.Merged{}, nil
		var typ, props string
		var first, last int64
		err := tx.QueryRowContext(ctx, `SELECT type, props, first_seen, last_seen FROM nodes WHERE client = ? AND key = ?`, g.client, alias).
			Scan(&typ, &props, &first, &last)
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (client, key, type, props, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (client, key) DO UPDATE SET props = json_patch(excluded.props, nodes.props),
				first_seen = min(nodes.first_seen, excluded.first_seen), last_seen = max(nodes.last_seen, excluded.last_seen)`,
			g.client, canonical, typ, props, first, last); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO merged (client, alias, canonical) VALUES (?, ?, ?)
			ON CONFLICT (client, alias) DO UPDATE SET canonical = excluded.canonical`, g.client, alias, canonical); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO node_chunks (client, key, chunk_id) SELECT client, ?, chunk_id FROM node_chunks
			WHERE client = ? AND key = ? ON CONFLICT DO NOTHING`, canonical, g.client, alias)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		m.ChunksMoved = int(n)
		edges, err := g.edges(ctx, tx, "edges", `key IN (SELECT key FROM edges INDEXED BY edges_from WHERE client = ? AND from_key = ?
			UNION SELECT key FROM edges INDEXED BY edges_to WHERE client = ? AND to_key = ?)`, g.client, alias, g.client, alias)
		if err != nil {
			return err
		}
		for _, e := range edges {
			ne := graph.Moved(e, alias, canonical)
			if ne.From == ne.To {
				m.EdgesDropped++
				moved = append(moved, [2]graph.Edge{e, {}})
			} else {
				m.EdgesMoved++
				moved = append(moved, [2]graph.Edge{e, ne})
				props, err := propsJSON(ne.Props)
				if err != nil {
					return err
				}
				if err := g.putEdge(ctx, tx, ne, props, sqlitedb.Micros(ne.FirstSeen), sqlitedb.Micros(ne.LastSeen)); err != nil {
					return err
				}
			}
			for _, q := range []string{`DELETE FROM edge_evidence WHERE client = ? AND edge_key = ?`, `DELETE FROM edges WHERE client = ? AND key = ?`} {
				if _, err := tx.ExecContext(ctx, q, g.client, e.Key()); err != nil {
					return err
				}
			}
		}
		for _, q := range []string{`DELETE FROM node_chunks WHERE client = ? AND key = ?`, `DELETE FROM nodes WHERE client = ? AND key = ?`} {
			if _, err := tx.ExecContext(ctx, q, g.client, alias); err != nil {
				return err
			}
		}
		m.NodeDeleted = true
		return nil
	}, func(a *adjacency) {
		if !m.NodeDeleted {
			return
		}
		a.addNode(canonical)
		for _, p := range moved {
			a.removeEdge(p[0].Type, p[0].From, p[0].To)
			if p[1].From != "" {
				a.addEdge(p[1].Type, p[1].From, p[1].To)
			}
		}
		a.removeNode(alias)
	})
	return m, err
}
