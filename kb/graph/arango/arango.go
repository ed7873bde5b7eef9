// Package arango is the ArangoDB graph backend (go-driver v2).
//
// Each client has its own collections, created on first use:
// c{client}_nodes (persistent indexes on type, on the byte-ordered sort key
// and on the chunk IDs), c{client}_edges (an edge collection, indexed on
// type and evidence) and the named graph c{client}_graph joining them.
// Document keys are derived from readable keys by hashing (ArangoDB forbids
// '/', spaces and more in _key and caps it at 254 bytes); the readable key is
// kept in the attribute "key". Upserts merge in AQL (UPSERT ... UPDATE with
// UNION_DISTINCT of chunk and evidence arrays); a batch is one AQL query, so
// it is written whole or not at all. Traversals run in AQL over the named
// graph, one breadth-first level per query so that a hub costs only the
// nodes it contributes; shortest paths use AQL's SHORTEST_PATH.
//
// No ArangoDB server can be installed on the machines this project is built
// on: the conformance suite (graphtest) runs against one when
// TEST_ARANGO_URL is set.
package arango

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/arangodb/go-driver/v2/arangodb"
	"github.com/arangodb/go-driver/v2/arangodb/shared"
	"github.com/arangodb/go-driver/v2/connection"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/graph"
)

// Config locates the server.
type Config struct {
	URL      string // e.g. http://arangodb:8529
	Database string // default "jervis", created when missing
	User     string // default "root"
	Password string
	Timeout  time.Duration // per request (default 30s)
}

// Store is the ArangoDB graph store.
type Store struct {
	client  arangodb.Client
	db      arangodb.Database
	timeout time.Duration

	mu    sync.Mutex
	ready map[string]bool // clients whose collections and graph exist
}

var _ graph.Store = (*Store)(nil)

// Open connects, checks the server answers and creates the database when
// it is missing.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("arangodb: url %q is not an http(s) URL", cfg.URL)
	}
	if cfg.Database == "" {
		cfg.Database = "jervis"
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	conn := connection.NewHttpConnection(connection.DefaultHTTPConfigurationWrapper(connection.NewRoundRobinEndpoints([]string{cfg.URL}), false))
	if err := conn.SetAuthentication(connection.NewBasicAuth(cfg.User, cfg.Password)); err != nil {
		return nil, fmt.Errorf("arangodb: %w", err)
	}
	s := &Store{client: arangodb.NewClient(conn), timeout: cfg.Timeout, ready: map[string]bool{}}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	exists, err := s.client.DatabaseExists(ctx, cfg.Database)
	if err != nil {
		return nil, fmt.Errorf("arangodb %s does not answer: %w", cfg.URL, err)
	}
	if !exists {
		if _, err := s.client.CreateDatabase(ctx, cfg.Database, nil); err != nil && !shared.IsConflict(err) {
			return nil, fmt.Errorf("arangodb: create database %s: %w", cfg.Database, err)
		}
	}
	if s.db, err = s.client.GetDatabase(ctx, cfg.Database, nil); err != nil {
		return nil, fmt.Errorf("arangodb: database %s: %w", cfg.Database, err)
	}
	return s, nil
}

// Ping implements graph.Store.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.client.Version(ctx)
	return err
}

// Close implements graph.Store (the HTTP connection needs no closing).
func (s *Store) Close() error { return nil }

// DropDatabase deletes the whole database (tests).
func (s *Store) DropDatabase(ctx context.Context) error { return s.db.Remove(ctx) }

// For implements graph.Store.
func (s *Store) For(client string) graph.Graph {
	g := &clientGraph{s: s, client: client, nodes: "c" + client + "_nodes", edges: "c" + client + "_edges", graph: "c" + client + "_graph"}
	if err := store.ValidateClientID(client); err != nil {
		g.err = fmt.Errorf("%w: %v", graph.ErrInvalid, err)
	}
	return g
}

type clientGraph struct {
	s                   *Store
	client              string
	nodes, edges, graph string
	err                 error // an invalid client: every call fails with it
}

// docKey derives a document _key from a readable key.
func docKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "k" + hex.EncodeToString(sum[:20])
}

// sortKey orders keys by their bytes, as the SQLite backend does (ArangoDB
// compares strings with a locale's collation; hexadecimal digits sort the
// same in both).
func sortKey(key string) string { return hex.EncodeToString([]byte(key)) }

// init creates the client's collections, indexes and graph once.
func (g *clientGraph) init(ctx context.Context) error {
	if g.err != nil {
		return g.err
	}
	g.s.mu.Lock()
	ready := g.s.ready[g.client]
	g.s.mu.Unlock()
	if ready {
		return nil
	}
	edgeType := arangodb.CollectionTypeEdge
	for _, c := range []struct {
		name    string
		props   *arangodb.CreateCollectionPropertiesV2
		indexes [][]string
	}{
		{g.nodes, nil, [][]string{{"type"}, {"sortKey"}, {"ragChunks[*]"}}},
		{g.edges, &arangodb.CreateCollectionPropertiesV2{Type: &edgeType}, [][]string{{"edgeType"}, {"evidence[*]"}}},
	} {
		coll, err := g.s.db.CreateCollectionV2(ctx, c.name, c.props)
		if shared.IsConflict(err) {
			coll, err = g.s.db.GetCollection(ctx, c.name, nil)
		}
		if err != nil {
			return fmt.Errorf("arangodb: collection %s: %w", c.name, err)
		}
		for _, fields := range c.indexes {
			if _, _, err := coll.EnsurePersistentIndex(ctx, fields, nil); err != nil {
				return fmt.Errorf("arangodb: index %s%v: %w", c.name, fields, err)
			}
		}
	}
	_, err := g.s.db.CreateGraph(ctx, g.graph, &arangodb.GraphDefinition{
		EdgeDefinitions: []arangodb.EdgeDefinition{{Collection: g.edges, From: []string{g.nodes}, To: []string{g.nodes}}},
	}, nil)
	if err != nil && !shared.IsConflict(err) {
		return fmt.Errorf("arangodb: graph %s: %w", g.graph, err)
	}
	g.s.mu.Lock()
	g.s.ready[g.client] = true
	g.s.mu.Unlock()
	return nil
}

// query runs an AQL query and reads every result into out.
func query[T any](ctx context.Context, db arangodb.Database, aql string, bind map[string]any) ([]T, error) {
	cur, err := db.Query(ctx, aql, &arangodb.QueryOptions{BindVars: bind})
	if err != nil {
		return nil, fmt.Errorf("arangodb: %w", err)
	}
	defer cur.Close()
	var out []T
	for cur.HasMore() {
		var v T
		if _, err := cur.ReadDocument(ctx, &v); err != nil {
			return nil, fmt.Errorf("arangodb: %w", err)
		}
		out = append(out, v)
	}
	return out, nil
}

// run is query for statements whose results are not needed.
func (g *clientGraph) run(ctx context.Context, aql string, bind map[string]any) error {
	_, err := query[any](ctx, g.s.db, aql, bind)
	return err
}

func (g *clientGraph) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.s.timeout)
}

// nodeDoc and edgeDoc are the stored shapes (ArangoDB's own attributes are
// written, and ignored when read).
type nodeDoc struct {
	DocKey    string         `json:"_key,omitempty"`
	SortKey   string         `json:"sortKey,omitempty"`
	Key       string         `json:"key"`
	Type      string         `json:"type"`
	Props     map[string]any `json:"props"`
	RAGChunks []string       `json:"ragChunks"`
	FirstSeen int64          `json:"firstSeen"`
	LastSeen  int64          `json:"lastSeen"`
}

func toNodeDoc(n graph.Node, now time.Time) nodeDoc {
	return nodeDoc{DocKey: docKey(n.Key), SortKey: sortKey(n.Key), Key: n.Key, Type: n.Type, Props: overlay(nil, n.Props),
		RAGChunks: union(n.RAGChunks), FirstSeen: micros(n.FirstSeen, now), LastSeen: micros(n.LastSeen, now)}
}

func (d nodeDoc) node() graph.Node {
	return graph.Node{Key: d.Key, Type: d.Type, Props: d.Props, RAGChunks: d.RAGChunks, FirstSeen: fromMicros(d.FirstSeen), LastSeen: fromMicros(d.LastSeen)}
}

type edgeDoc struct {
	DocKey     string         `json:"_key,omitempty"`
	DocFrom    string         `json:"_from,omitempty"`
	DocTo      string         `json:"_to,omitempty"`
	Key        string         `json:"key"`
	Type       string         `json:"edgeType"`
	From       string         `json:"from"`
	To         string         `json:"to"`
	Props      map[string]any `json:"props"`
	Evidence   []string       `json:"evidence"`
	Confidence float64        `json:"confidence"`
	Origin     string         `json:"origin"`
	FirstSeen  int64          `json:"firstSeen"`
	LastSeen   int64          `json:"lastSeen"`
}

// toEdgeDoc is e as stored, joining nodes of the collection nodes.
func toEdgeDoc(e graph.Edge, nodes string, now time.Time) edgeDoc {
	return edgeDoc{DocKey: docKey(e.Key()), DocFrom: nodes + "/" + docKey(e.From), DocTo: nodes + "/" + docKey(e.To),
		Key: e.Key(), Type: e.Type, From: e.From, To: e.To, Props: overlay(nil, e.Props), Evidence: union(e.EvidenceChunkIDs),
		Confidence: e.Confidence, Origin: string(e.Origin), FirstSeen: micros(e.FirstSeen, now), LastSeen: micros(e.LastSeen, now)}
}

func (d edgeDoc) edge() graph.Edge {
	return graph.Edge{Type: d.Type, From: d.From, To: d.To, Props: d.Props, EvidenceChunkIDs: d.Evidence, Confidence: d.Confidence,
		Origin: graph.Origin(d.Origin), FirstSeen: fromMicros(d.FirstSeen), LastSeen: fromMicros(d.LastSeen)}
}

func micros(t, now time.Time) int64 {
	if t.IsZero() {
		return now.UnixMicro()
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// union returns the sorted distinct elements of the lists (never nil: AQL's
// array functions refuse null).
func union(lists ...[]string) []string {
	out := []string{}
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mergeByKey turns items into one document per key, in first-seen order:
// an UPSERT does not see an earlier write of the same query, so a batch
// that repeats a key is merged before it is sent.
func mergeByKey[T, D any](items []T, doc func(T) D, key func(D) string, merge func(into *D, d D)) []D {
	at := map[string]int{}
	var out []D
	for _, it := range items {
		d := doc(it)
		if i, ok := at[key(d)]; ok {
			merge(&out[i], d)
			continue
		}
		at[key(d)] = len(out)
		out = append(out, d)
	}
	return out
}

func overlay(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// UpsertNodes implements graph.Graph. Nodes repeated in one batch are merged
// first (an UPSERT does not see an earlier write of the same query).
func (g *clientGraph) UpsertNodes(ctx context.Context, nodes ...graph.Node) error {
	for _, n := range nodes {
		if err := graph.ValidateNode(n); err != nil {
			return err
		}
	}
	if err := g.init(ctx); err != nil {
		return err
	}
	now := time.Now()
	docs := mergeByKey(nodes, func(n graph.Node) nodeDoc { return toNodeDoc(n, now) }, func(d nodeDoc) string { return d.DocKey },
		func(m *nodeDoc, d nodeDoc) {
			m.Props, m.RAGChunks = overlay(m.Props, d.Props), union(m.RAGChunks, d.RAGChunks)
			m.FirstSeen, m.LastSeen = min(m.FirstSeen, d.FirstSeen), max(m.LastSeen, d.LastSeen)
		})
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	return g.run(ctx, `FOR n IN @docs
		UPSERT { _key: n._key }
		INSERT n
		UPDATE {
			props: MERGE(OLD.props, n.props),
			ragChunks: SORTED(UNION_DISTINCT(OLD.ragChunks, n.ragChunks)),
			firstSeen: MIN([OLD.firstSeen, n.firstSeen]),
			lastSeen: MAX([OLD.lastSeen, n.lastSeen])
		} IN @@nodes`, map[string]any{"docs": docs, "@nodes": g.nodes})
}

// UpsertEdges implements graph.Graph: every endpoint must exist, then the
// whole batch is one query.
func (g *clientGraph) UpsertEdges(ctx context.Context, edges ...graph.Edge) error {
	for _, e := range edges {
		if err := graph.ValidateEdge(e); err != nil {
			return err
		}
	}
	if err := g.init(ctx); err != nil {
		return err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	ends := map[string]string{} // doc key -> readable key
	for _, e := range edges {
		ends[docKey(e.From)], ends[docKey(e.To)] = e.From, e.To
	}
	keys := make([]string, 0, len(ends))
	for k := range ends {
		keys = append(keys, k)
	}
	missing, err := query[string](ctx, g.s.db, `FOR k IN @keys FILTER DOCUMENT(@coll, k) == null RETURN k`, map[string]any{"keys": keys, "coll": g.nodes})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("edge endpoint %s: %w", ends[missing[0]], graph.ErrNotFound)
	}
	now := time.Now()
	docs := mergeByKey(edges, func(e graph.Edge) edgeDoc { return toEdgeDoc(e, g.nodes, now) }, func(d edgeDoc) string { return d.DocKey },
		func(m *edgeDoc, d edgeDoc) {
			m.Props, m.Evidence = overlay(m.Props, d.Props), union(m.Evidence, d.Evidence)
			if d.Confidence > m.Confidence {
				m.Confidence, m.Origin = d.Confidence, d.Origin
			}
			m.FirstSeen, m.LastSeen = min(m.FirstSeen, d.FirstSeen), max(m.LastSeen, d.LastSeen)
		})
	return g.run(ctx, `FOR e IN @docs
		UPSERT { _key: e._key }
		INSERT e
		UPDATE {
			props: MERGE(OLD.props, e.props),
			evidence: SORTED(UNION_DISTINCT(OLD.evidence, e.evidence)),
			origin: e.confidence > OLD.confidence ? e.origin : OLD.origin,
			confidence: MAX([OLD.confidence, e.confidence]),
			firstSeen: MIN([OLD.firstSeen, e.firstSeen]),
			lastSeen: MAX([OLD.lastSeen, e.lastSeen])
		} IN @@edges`, map[string]any{"docs": docs, "@edges": g.edges})
}

// Node implements graph.Graph.
func (g *clientGraph) Node(ctx context.Context, key string) (graph.Node, error) {
	ns, err := g.nodesByKey(ctx, []string{key}, true)
	if err != nil {
		return graph.Node{}, err
	}
	if len(ns) == 0 {
		return graph.Node{}, fmt.Errorf("node %s: %w", key, graph.ErrNotFound)
	}
	if ns[0].RAGChunks == nil {
		ns[0].RAGChunks = []string{}
	}
	return ns[0], nil
}

// nodesByKey loads the existing nodes of keys, with their chunk IDs when
// chunks is set.
func (g *clientGraph) nodesByKey(ctx context.Context, keys []string, chunks bool) ([]graph.Node, error) {
	docs, err := fetch[nodeDoc](ctx, g, g.nodes, keys, `MERGE(d, {ragChunks: @chunks ? d.ragChunks : null})`, map[string]any{"chunks": chunks})
	out := make([]graph.Node, len(docs))
	for i, d := range docs {
		out[i] = d.node()
	}
	return out, err
}

// Edge implements graph.Graph.
func (g *clientGraph) Edge(ctx context.Context, key string) (graph.Edge, error) {
	docs, err := fetch[edgeDoc](ctx, g, g.edges, []string{key}, "d", nil)
	if err != nil {
		return graph.Edge{}, err
	}
	if len(docs) == 0 {
		return graph.Edge{}, fmt.Errorf("edge %s: %w", key, graph.ErrNotFound)
	}
	return docs[0].edge(), nil
}

// fetch reads the existing documents of coll whose readable keys are keys,
// each as ret (an expression of d) returns it.
func fetch[D any](ctx context.Context, g *clientGraph, coll string, keys []string, ret string, bind map[string]any) ([]D, error) {
	if err := g.init(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	dks := make([]string, len(keys))
	for i, k := range keys {
		dks[i] = docKey(k)
	}
	vars := map[string]any{"keys": dks, "coll": coll}
	for k, v := range bind {
		vars[k] = v
	}
	return query[D](ctx, g.s.db, `FOR k IN @keys LET d = DOCUMENT(@coll, k) FILTER d != null RETURN `+ret, vars)
}

// level follows the edges of one direction out of the frontier (readable
// keys), in frontier key, edge type and edge key order: one AQL traversal
// step over the named graph.
func (g *clientGraph) level(ctx context.Context, frontier []string, dir graph.Direction, types []string) ([]graph.Step, error) {
	aqlDir := "OUTBOUND"
	if dir == graph.In {
		aqlDir = "INBOUND"
	}
	starts := make([]string, len(frontier))
	for i, k := range frontier {
		starts[i] = g.nodes + "/" + docKey(k)
	}
	rows, err := query[struct {
		Type  string `json:"type"`
		Other string `json:"other"`
	}](ctx, g.s.db, `FOR s IN @starts
		LET f = DOCUMENT(s)
		FOR v, e IN 1..1 `+aqlDir+` s GRAPH @graph
			FILTER LENGTH(@types) == 0 OR e.edgeType IN @types
			SORT f.sortKey, e.edgeType, e.key
			RETURN {type: e.edgeType, other: v.key}`,
		map[string]any{"starts": starts, "graph": g.graph, "types": types})
	steps := make([]graph.Step, len(rows))
	for i, r := range rows {
		steps[i] = graph.Step{Type: r.Type, Other: r.Other}
	}
	return steps, err
}

// Neighbors implements graph.Graph with graph.Walk (the SQLite backend's
// walk: same order, same limits), one AQL traversal step per level and
// direction.
func (g *clientGraph) Neighbors(ctx context.Context, q graph.NeighborQuery) (graph.Neighborhood, error) {
	var hood graph.Neighborhood
	if err := q.Validate(); err != nil {
		return hood, err
	}
	existing, err := g.nodesByKey(ctx, q.Start, false)
	if err != nil {
		return hood, err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	var start []string
	for _, k := range q.Start {
		if slices.ContainsFunc(existing, func(n graph.Node) bool { return n.Key == k }) && !slices.Contains(start, k) {
			start = append(start, k)
		}
	}
	keys, depth, err := graph.Walk(q, start, func(frontier []string, dir graph.Direction) iter.Seq2[graph.Step, error] {
		return func(yield func(graph.Step, error) bool) {
			steps, err := g.level(ctx, frontier, dir, q.EdgeTypes)
			if err != nil {
				yield(graph.Step{}, err)
				return
			}
			for _, st := range steps {
				if !yield(st, nil) {
					return
				}
			}
		}
	})
	if err != nil {
		return hood, err
	}
	if len(keys) == 0 {
		return hood, nil
	}
	ns, err := g.nodesByKey(ctx, keys, false)
	if err != nil {
		return hood, err
	}
	for _, n := range ns {
		hood.Nodes = append(hood.Nodes, graph.Visit{Node: n, Depth: depth[n.Key]})
	}
	graph.SortVisits(hood.Nodes)
	// The edges among the nodes reached that the traversal may follow.
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = g.nodes + "/" + docKey(k)
	}
	docs, err := query[edgeDoc](ctx, g.s.db, `FOR e IN @@edges
		FILTER e._from IN @ids AND e._to IN @ids AND (LENGTH(@types) == 0 OR e.edgeType IN @types)
		SORT e.key RETURN e`, map[string]any{"@edges": g.edges, "ids": ids, "types": q.EdgeTypes})
	if err != nil {
		return hood, err
	}
	for _, d := range docs {
		hood.Edges = append(hood.Edges, d.edge())
	}
	return hood, nil
}

// ShortestPath implements graph.Graph with AQL's SHORTEST_PATH over the
// named graph, in either direction.
func (g *clientGraph) ShortestPath(ctx context.Context, from, to string, maxDepth int) (graph.Path, error) {
	var p graph.Path
	if maxDepth <= 0 || maxDepth > graph.MaxDepth*2 {
		return p, fmt.Errorf("%w: maxDepth: %d is not 1..%d", graph.ErrInvalid, maxDepth, graph.MaxDepth*2)
	}
	ends, err := g.nodesByKey(ctx, []string{from, to}, false)
	if err != nil {
		return p, err
	}
	if len(ends) < 2 && from != to || len(ends) == 0 {
		return p, fmt.Errorf("path %s -> %s: endpoint: %w", from, to, graph.ErrNotFound)
	}
	if from == to {
		return graph.Path{Nodes: ends[:1]}, nil
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	type hop struct {
		Node nodeDoc  `json:"v"`
		Edge *edgeDoc `json:"e"`
	}
	hops, err := query[hop](ctx, g.s.db, `FOR v, e IN ANY SHORTEST_PATH @from TO @to GRAPH @graph
		RETURN {v: UNSET(v, "ragChunks"), e: e}`,
		map[string]any{"from": g.nodes + "/" + docKey(from), "to": g.nodes + "/" + docKey(to), "graph": g.graph})
	if err != nil {
		return p, err
	}
	if len(hops) == 0 || len(hops)-1 > maxDepth {
		return p, fmt.Errorf("path %s -> %s within %d: %w", from, to, maxDepth, graph.ErrNotFound)
	}
	for i, h := range hops {
		p.Nodes = append(p.Nodes, h.Node.node())
		if i > 0 && h.Edge != nil {
			p.Edges = append(p.Edges, h.Edge.edge())
		}
	}
	return p, nil
}

// RemoveEvidence implements graph.Graph. Order: edges lose the chunk IDs
// (those left with none are removed), nodes lose them, then the nodes that
// lost chunks or an edge and are left with neither are removed. Each step
// is one query; a crash between steps leaves what a repeated call finishes.
// The chunks are found by their IDs (the evidence and ragChunks arrays are
// indexed): held's nodes are not needed.
func (g *clientGraph) RemoveEvidence(ctx context.Context, held []graph.Held) (graph.Removed, error) {
	var r graph.Removed
	if len(held) == 0 {
		return r, nil
	}
	chunkIDs := make([]string, len(held))
	for i, h := range held {
		chunkIDs[i] = h.ChunkID
	}
	if err := g.init(ctx); err != nil {
		return r, err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	type touched struct {
		Key  string `json:"k"`
		From string `json:"from"`
		To   string `json:"to"`
		Left int    `json:"left"`
	}
	edges, err := query[touched](ctx, g.s.db, `FOR e IN @@edges FILTER e.evidence ANY IN @ids
		LET left = SORTED(MINUS(e.evidence, @ids))
		UPDATE e WITH {evidence: left} IN @@edges
		RETURN {k: e._key, from: e._from, to: e._to, left: LENGTH(left)}`, map[string]any{"@edges": g.edges, "ids": chunkIDs})
	if err != nil {
		return r, err
	}
	var dead []string
	candidates := map[string]bool{}
	for _, e := range edges {
		if e.Left == 0 {
			dead = append(dead, e.Key)
			candidates[e.From], candidates[e.To] = true, true
		}
	}
	if len(dead) > 0 {
		if err := g.run(ctx, `FOR k IN @dead REMOVE k IN @@edges`, map[string]any{"dead": dead, "@edges": g.edges}); err != nil {
			return r, err
		}
	}
	r.EdgesDeleted, r.EdgesUpdated = len(dead), len(edges)-len(dead)
	nodeIDs, err := query[string](ctx, g.s.db, `FOR n IN @@nodes FILTER n.ragChunks ANY IN @ids
		UPDATE n WITH {ragChunks: SORTED(MINUS(n.ragChunks, @ids))} IN @@nodes
		RETURN n._id`, map[string]any{"@nodes": g.nodes, "ids": chunkIDs})
	if err != nil {
		return r, err
	}
	for _, id := range nodeIDs {
		candidates[id] = true
	}
	ids := make([]string, 0, len(candidates))
	for id := range candidates {
		ids = append(ids, id)
	}
	removed, err := query[int](ctx, g.s.db, `FOR id IN @ids
		LET n = DOCUMENT(id)
		FILTER n != null AND LENGTH(n.ragChunks) == 0
		FILTER LENGTH(FOR e IN @@edges FILTER e._from == id OR e._to == id LIMIT 1 RETURN 1) == 0
		REMOVE n IN @@nodes
		RETURN 1`, map[string]any{"ids": ids, "@edges": g.edges, "@nodes": g.nodes})
	if err != nil {
		return r, err
	}
	r.NodesDeleted = len(removed)
	return r, nil
}

// CountByType implements graph.Graph.
func (g *clientGraph) CountByType(ctx context.Context) (map[string]int, error) {
	return g.count(ctx, g.nodes, "type")
}

// CountEdgesByType implements graph.Graph.
func (g *clientGraph) CountEdgesByType(ctx context.Context) (map[string]int, error) {
	return g.count(ctx, g.edges, "edgeType")
}

func (g *clientGraph) count(ctx context.Context, coll, field string) (map[string]int, error) {
	if err := g.init(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	rows, err := query[struct {
		T string `json:"t"`
		N int    `json:"n"`
	}](ctx, g.s.db, `FOR d IN @@coll COLLECT t = d[@field] WITH COUNT INTO n RETURN {t, n}`, map[string]any{"@coll": coll, "field": field})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.T] = r.N
	}
	return out, nil
}

// ListNodes implements graph.Graph, in byte order of the keys.
func (g *clientGraph) ListNodes(ctx context.Context, q graph.NodeQuery) ([]graph.Node, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := g.init(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	docs, err := query[nodeDoc](ctx, g.s.db, `FOR n IN @@nodes
		FILTER n.sortKey > @after AND (@type == "" OR n.type == @type) AND (@prefix == "" OR STARTS_WITH(n.sortKey, @prefix))
		SORT n.sortKey LIMIT @limit RETURN n`,
		map[string]any{"@nodes": g.nodes, "after": sortKey(q.After), "type": q.Type, "prefix": sortKey(q.Prefix), "limit": q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]graph.Node, len(docs))
	for i, d := range docs {
		out[i] = d.node()
		if out[i].RAGChunks == nil {
			out[i].RAGChunks = []string{}
		}
	}
	return out, nil
}

// Drop implements graph.Graph: the client's edges, then its nodes.
func (g *clientGraph) Drop(ctx context.Context) error {
	if err := g.init(ctx); err != nil {
		return err
	}
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	return errors.Join(
		g.run(ctx, `FOR e IN @@edges REMOVE e IN @@edges`, map[string]any{"@edges": g.edges}),
		g.run(ctx, `FOR n IN @@nodes REMOVE n IN @@nodes`, map[string]any{"@nodes": g.nodes}),
	)
}

// MergeNode implements graph.Graph. Order: canonical takes alias's chunks
// (created when missing), the moved edges are upserted, then alias's old
// edges and alias itself are removed: a crash between steps leaves alias
// with its edges, which a repeated call moves again (upserts merge).
func (g *clientGraph) MergeNode(ctx context.Context, alias, canonical string) (graph.Merged, error) {
	var m graph.Merged
	if alias == canonical || alias == "" || canonical == "" {
		return m, fmt.Errorf("%w: merge %q into %q: two different keys are needed", graph.ErrInvalid, alias, canonical)
	}
	found, err := fetch[nodeDoc](ctx, g, g.nodes, []string{alias}, "d", nil)
	if err != nil || len(found) == 0 {
		return m, err
	}
	a := found[0]
	ctx, cancel := g.ctx(ctx)
	defer cancel()
	c := a
	c.DocKey, c.SortKey, c.Key = docKey(canonical), sortKey(canonical), canonical
	c.Props, c.RAGChunks = overlay(nil, a.Props), union(a.RAGChunks)
	if err := g.run(ctx, `UPSERT { _key: @n._key } INSERT @n
		UPDATE { props: MERGE(@n.props, OLD.props), ragChunks: SORTED(UNION_DISTINCT(OLD.ragChunks, @n.ragChunks)),
			firstSeen: MIN([OLD.firstSeen, @n.firstSeen]), lastSeen: MAX([OLD.lastSeen, @n.lastSeen]) } IN @@nodes`,
		map[string]any{"n": c, "@nodes": g.nodes}); err != nil {
		return m, err
	}
	m.ChunksMoved = len(a.RAGChunks)
	id := g.nodes + "/" + docKey(alias)
	old, err := query[edgeDoc](ctx, g.s.db, `FOR e IN @@edges FILTER e._from == @id OR e._to == @id RETURN e`, map[string]any{"@edges": g.edges, "id": id})
	if err != nil {
		return m, err
	}
	var moved []graph.Edge
	var gone []string
	for _, d := range old {
		gone = append(gone, d.DocKey)
		e := graph.Moved(d.edge(), alias, canonical)
		if e.From == e.To {
			m.EdgesDropped++
			continue
		}
		moved = append(moved, e)
	}
	m.EdgesMoved = len(moved)
	if len(moved) > 0 {
		if err := g.UpsertEdges(ctx, moved...); err != nil {
			return m, err
		}
	}
	if err := g.run(ctx, `FOR k IN @gone REMOVE k IN @@edges OPTIONS { ignoreErrors: true }`, map[string]any{"gone": gone, "@edges": g.edges}); err != nil {
		return m, err
	}
	if err := g.run(ctx, `REMOVE @k IN @@nodes OPTIONS { ignoreErrors: true }`, map[string]any{"k": docKey(alias), "@nodes": g.nodes}); err != nil {
		return m, err
	}
	m.NodeDeleted = true
	return m, nil
}
