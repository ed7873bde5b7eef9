// Package graph is the knowledge graph: per-client nodes and edges in which
// every edge carries the IDs of the chunks whose text supports it.
//
// A Store hands out one Graph per client (For); a Graph can only see and
// change its own client's nodes and edges, so isolation cannot be forgotten
// by a caller. Backends: sqlite (embedded default), arango (production).
// Every backend passes graphtest.Exercise.
//
// Evidence rules, enforced by every backend:
//   - an edge without evidence chunk IDs is rejected (ErrNoEvidence);
//   - both endpoints of an edge must exist (ErrNotFound names the missing key);
//   - RemoveEvidence drops chunk IDs from the nodes and edges that hold them
//     (each chunk comes with the nodes it was written to: Held); an edge left
//     with no evidence is deleted, and so is a node left with no chunks and
//     no edges.
package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

var (
	// ErrNotFound means no such node or edge for this client.
	ErrNotFound = errors.New("not found")
	// ErrNoEvidence means an edge came without evidence chunk IDs.
	ErrNoEvidence = errors.New("edge has no evidence")
	// ErrInvalid means malformed input; the message names the field.
	ErrInvalid = errors.New("invalid")
)

// Origin says how an edge was found.
type Origin string

// Origins, from most to least certain.
const (
	OriginUser     Origin = "user"     // stated by a person through the API
	OriginMetadata Origin = "metadata" // a source's structured fields (sender, assignee)
	OriginSyntax   Origin = "syntax"   // relationship syntax in the text
	// OriginSimilarity is an edge between two items whose texts are alike
	// (possible_duplicate); its confidence is their similarity.
	OriginSimilarity Origin = "similarity"
	OriginLLM        Origin = "llm" // extracted by a model from prose
)

// Valid reports whether o is a known origin.
func (o Origin) Valid() bool {
	switch o {
	case OriginUser, OriginMetadata, OriginSyntax, OriginSimilarity, OriginLLM:
		return true
	}
	return false
}

// Node is an entity. Key is its canonical ref ("person:ann").
type Node struct {
	Key       string         `json:"key"`
	Type      string         `json:"type"`
	Props     map[string]any `json:"props,omitempty"`
	RAGChunks []string       `json:"ragChunks"`
	FirstSeen time.Time      `json:"firstSeen"`
	LastSeen  time.Time      `json:"lastSeen"`
}

// Edge is a typed, directed relationship with its evidence.
type Edge struct {
	Type             string         `json:"edgeType"`
	From             string         `json:"from"`
	To               string         `json:"to"`
	Props            map[string]any `json:"props,omitempty"`
	EvidenceChunkIDs []string       `json:"evidenceChunkIds"`
	Confidence       float64        `json:"confidence"`
	Origin           Origin         `json:"origin"`
	FirstSeen        time.Time      `json:"firstSeen"`
	LastSeen         time.Time      `json:"lastSeen"`
}

// Key returns the edge's key: "type::from->to".
func (e Edge) Key() string { return EdgeKey(e.Type, e.From, e.To) }

// EdgeKey builds an edge key.
func EdgeKey(typ, from, to string) string { return typ + "::" + from + "->" + to }

// Direction of a traversal relative to its start.
type Direction string

// Directions.
const (
	Out Direction = "out"
	In  Direction = "in"
	Any Direction = "any"
)

// NeighborQuery selects the neighbourhood of one or more start nodes.
type NeighborQuery struct {
	Start     []string
	Depth     int       // 0..MaxDepth; 0 returns the start nodes only
	Direction Direction // default Any
	EdgeTypes []string  // empty: all
	Limit     int       // most nodes returned (default 100), nearest first
}

// NodeQuery selects nodes, in key order.
type NodeQuery struct {
	Type   string // empty: all
	Prefix string // keys that start with it (case-sensitive)
	After  string // keys after this one (the last of the previous page)
	Limit  int    // 1..1000, default 100
}

// Validate checks the query and fills defaults.
func (q *NodeQuery) Validate() error {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return fmt.Errorf("%w: limit: %d is not 1..1000", ErrInvalid, q.Limit)
	}
	return nil
}

// MaxDepth bounds traversals.
const MaxDepth = 5

// Validate checks the query and fills defaults.
func (q *NeighborQuery) Validate() error {
	if q.Direction == "" {
		q.Direction = Any
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	switch {
	case len(q.Start) == 0:
		return fmt.Errorf("%w: start: at least one node key", ErrInvalid)
	case q.Depth < 0 || q.Depth > MaxDepth:
		return fmt.Errorf("%w: depth: %d is not 0..%d", ErrInvalid, q.Depth, MaxDepth)
	case q.Direction != Out && q.Direction != In && q.Direction != Any:
		return fmt.Errorf("%w: direction: %q is not out, in or any", ErrInvalid, q.Direction)
	}
	return nil
}

// Visit is a node reached by a traversal, with its distance from the start.
// Its RAGChunks are left empty (a hub node can have thousands); Graph.Node
// returns them.
type Visit struct {
	Node
	Depth int `json:"depth"`
}

// SortVisits orders visits nearest first, then by key: the order every
// backend returns a neighbourhood in.
func SortVisits(vs []Visit) {
	slices.SortFunc(vs, func(a, b Visit) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// Neighborhood is a traversal's result: the nodes reached (nearest first) and
// the edges among them that the traversal may follow.
type Neighborhood struct {
	Nodes []Visit `json:"nodes"`
	Edges []Edge  `json:"edges"`
}

// Path is a shortest path: Nodes[0] is the start, Edges[i] joins Nodes[i] and
// Nodes[i+1] (in either direction).
type Path struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// Held is a chunk RemoveEvidence drops, with the nodes that can hold it.
// The embedded backend keeps no index by chunk ID: it looks for the chunk
// in Nodes, in the edges between two of them, and in the edges of
// Nodes[0]. (Its two indexes by chunk ID were written with every chunk
// link and read by nothing else; without them the dev Jira corpus flowed
// at 358 documents/s against 302 and wrote 416 MiB per 1,000 documents
// against 598: BENCHMARKS.md, thirtieth round.)
type Held struct {
	ChunkID string `json:"chunkId"`
	// Nodes are the chunk's own node first (an edge of it holds the chunk
	// whatever its other end: possible_duplicate), then every node the
	// chunk was written to and every end of an edge it is evidence of —
	// for a chunk the knowledge base wrote, its GraphRefs. A node merged
	// into another since (MergeNode) left it there: the embedded backend
	// follows its own merges from these keys, and the knowledge base adds
	// what the alias registry resolves each to now (merges made before
	// the graph recorded them).
	Nodes []string `json:"nodes"`
}

// Removed reports what RemoveEvidence changed.
type Removed struct {
	EdgesUpdated int `json:"edgesUpdated"`
	EdgesDeleted int `json:"edgesDeleted"`
	NodesDeleted int `json:"nodesDeleted"`
}

// Graph is one client's graph.
type Graph interface {
	// UpsertNodes creates nodes or merges into existing ones: props are
	// overlaid (new values win), RAGChunks are unioned, FirstSeen keeps the
	// earliest and LastSeen the latest time. Type is kept from creation.
	UpsertNodes(ctx context.Context, nodes ...Node) error
	// UpsertEdges creates edges or merges into existing ones (same key):
	// evidence is unioned, confidence keeps the highest, props are overlaid.
	UpsertEdges(ctx context.Context, edges ...Edge) error
	// Node returns one node.
	Node(ctx context.Context, key string) (Node, error)
	// Edge returns one edge by key.
	Edge(ctx context.Context, key string) (Edge, error)
	// Neighbors traverses from q.Start.
	Neighbors(ctx context.Context, q NeighborQuery) (Neighborhood, error)
	// ShortestPath finds a path of at most maxDepth edges, following edges in
	// either direction, or ErrNotFound.
	ShortestPath(ctx context.Context, from, to string, maxDepth int) (Path, error)
	// RemoveEvidence drops the chunks' IDs from the nodes and edges that
	// hold them (see Held and the package comment).
	RemoveEvidence(ctx context.Context, held []Held) (Removed, error)
	// CountByType counts nodes per type.
	CountByType(ctx context.Context) (map[string]int, error)
	// CountEdgesByType counts edges per type.
	CountEdgesByType(ctx context.Context) (map[string]int, error)
	// ListNodes lists nodes in key order, with their chunk IDs.
	ListNodes(ctx context.Context, q NodeQuery) ([]Node, error)
	// MergeNode makes alias one with canonical: alias's chunk links and
	// edges move to canonical (created with alias's type when missing; its
	// own props win over alias's), each moved edge keeping its type,
	// origin, confidence, props and evidence and merging into an edge of
	// the same key as UpsertEdges does; an edge between the two, which
	// would join canonical to itself, is dropped. alias is then deleted. A
	// missing alias is no merge (a repeated call finds nothing to do), and
	// a crash part way leaves what a repeated call finishes.
	MergeNode(ctx context.Context, alias, canonical string) (Merged, error)
	// Drop deletes the client's whole graph (a rebuild starts from it).
	Drop(ctx context.Context) error
}

// Merged reports what MergeNode changed.
type Merged struct {
	EdgesMoved   int  `json:"edgesMoved"`
	EdgesDropped int  `json:"edgesDropped"`
	ChunksMoved  int  `json:"chunksMoved"`
	NodeDeleted  bool `json:"nodeDeleted"`
}

// Moved returns e with alias replaced by canonical at either end.
func Moved(e Edge, alias, canonical string) Edge {
	if e.From == alias {
		e.From = canonical
	}
	if e.To == alias {
		e.To = canonical
	}
	return e
}

// Store is a graph backend holding every client's graph.
type Store interface {
	// For returns client's graph.
	For(client string) Graph
	Ping(ctx context.Context) error
	Close() error
}

// ValidateNode checks a node before it is stored.
func ValidateNode(n Node) error {
	switch {
	case n.Key == "":
		return fmt.Errorf("%w: node key: empty", ErrInvalid)
	case len(n.Key) > MaxKeyLen:
		return fmt.Errorf("%w: node key: %d bytes, more than %d", ErrInvalid, len(n.Key), MaxKeyLen)
	case n.Type == "":
		return fmt.Errorf("%w: node %s: type is empty", ErrInvalid, n.Key)
	}
	return nil
}

// ValidateEdge checks an edge before it is stored.
func ValidateEdge(e Edge) error {
	switch {
	case e.Type == "" || e.From == "" || e.To == "":
		return fmt.Errorf("%w: edge %q: type, from and to are required", ErrInvalid, e.Key())
	case len(e.EvidenceChunkIDs) == 0:
		return fmt.Errorf("edge %s: %w", e.Key(), ErrNoEvidence)
	case !e.Origin.Valid():
		return fmt.Errorf("%w: edge %s: origin %q is not user, metadata, syntax, similarity or llm", ErrInvalid, e.Key(), e.Origin)
	case !(e.Confidence >= 0 && e.Confidence <= 1): // NaN too
		return fmt.Errorf("%w: edge %s: confidence %v is not 0..1", ErrInvalid, e.Key(), e.Confidence)
	}
	return nil
}

// MaxKeyLen is the longest node key any backend accepts (ArangoDB's _key
// limit is 254 bytes; keys are hashed into it, the readable key is kept).
const MaxKeyLen = 1024
