package sqlite

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/sqlitedb/sqlitedbtest"
	"github.com/jervis-dev/jervis/kb/graph"
)

// A graph written before nodes and edges moved to rowid tables (migrations
// 3 and 4) opens with every node, edge, prop and evidence row as it was,
// upserts merge into them as before, and the adjacency's load still reads
// an index alone.
func TestRowidMigrationKeepsTheGraph(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := sqlitedbtest.WrittenBefore(t, FileName, migrations[:2], sqlitedbtest.Exec(
		`INSERT INTO nodes VALUES ('acme', 'person:ann', 'person', '{"name":"Ann"}', 10, 20), ('acme', 'jira:x-1', 'jira', '{}', 10, 10),
			('other', 'person:ann', 'person', '{"name":"Other Ann"}', 5, 5)`,
		`INSERT INTO edges VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'assigned_to', 'jira:x-1', 'person:ann', '{"since":"2015"}', 0.95, 'metadata', 10, 10)`,
		`INSERT INTO edge_evidence VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'c1')`,
		`INSERT INTO node_chunks VALUES ('acme', 'jira:x-1', 'c1')`,
	))

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, table := range []string{"nodes", "edges"} {
		var ddl string
		if err := s.db.QueryRow(ctx, `SELECT sql FROM sqlite_schema WHERE name = ?`, table).Scan(&ddl); err != nil || strings.Contains(ddl, "WITHOUT ROWID") {
			t.Fatalf("%s after the migration (%v): %s", table, err, ddl)
		}
	}
	// Loading a client's adjacency reads one index, not each edge's row.
	rows, err := s.db.R.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT type, from_key, to_key FROM edges WHERE client = ?`, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "; "
	}
	rows.Close()
	if !strings.Contains(plan, "COVERING INDEX") {
		t.Fatalf("the adjacency's edges are read by %q, not a covering index", plan)
	}
	g := s.For("acme")
	ann, err := g.Node(ctx, "person:ann")
	if err != nil || ann.Props["name"] != "Ann" || ann.Type != "person" {
		t.Fatalf("person:ann %+v (%v)", ann, err)
	}
	if other, err := s.For("other").Node(ctx, "person:ann"); err != nil || other.Props["name"] != "Other Ann" {
		t.Fatalf("the other client's person:ann %+v (%v)", other, err)
	}
	hood, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"jira:x-1"}, Depth: 1})
	if err != nil || len(hood.Edges) != 1 {
		t.Fatalf("neighbours of jira:x-1: %+v (%v)", hood, err)
	}
	if e := hood.Edges[0]; e.To != "person:ann" || e.Props["since"] != "2015" || e.Confidence != 0.95 || len(e.EvidenceChunkIDs) != 1 || e.EvidenceChunkIDs[0] != "c1" {
		t.Fatalf("the migrated edge: %+v", e)
	}
	if err := g.UpsertEdges(ctx, graph.Edge{Type: "assigned_to", From: "jira:x-1", To: "person:ann", Props: map[string]any{"role": "dev"}, Confidence: 0.5, Origin: graph.OriginLLM, EvidenceChunkIDs: []string{"c2"}}); err != nil {
		t.Fatal(err)
	}
	hood, err = g.Neighbors(ctx, graph.NeighborQuery{Start: []string{"jira:x-1"}, Depth: 1})
	if err != nil || len(hood.Edges) != 1 {
		t.Fatalf("after an upsert: %+v (%v)", hood, err)
	}
	if e := hood.Edges[0]; e.Props["since"] != "2015" || e.Props["role"] != "dev" || e.Confidence != 0.95 || e.Origin != graph.OriginMetadata || len(e.EvidenceChunkIDs) != 2 {
		t.Fatalf("the upsert did not merge into the migrated edge: %+v", e)
	}
}

// An edge's evidence is the chunk its row holds (migration 7) and its
// edge_evidence rows: an edge written before keeps its rows and gains the
// row's chunk at its next upsert, a new edge with one chunk writes no row,
// and RemoveEvidence takes a chunk from either place, the edge going only
// when neither holds one.
func TestEvidenceInTheEdgeRowAndItsRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := sqlitedbtest.WrittenBefore(t, FileName, migrations[:6], sqlitedbtest.Exec(
		`INSERT INTO nodes (client, key, type, first_seen, last_seen) VALUES ('acme', 'jira:x-1', 'jira', 10, 10), ('acme', 'person:ann', 'person', 10, 10)`,
		`INSERT INTO edges (client, key, type, from_key, to_key, confidence, origin, first_seen, last_seen)
			VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'assigned_to', 'jira:x-1', 'person:ann', 0.9, 'metadata', 10, 10)`,
		`INSERT INTO edge_evidence VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'c1')`,
	))

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.For("acme")
	key := graph.EdgeKey("assigned_to", "jira:x-1", "person:ann")
	evidence := func(key string) []string {
		t.Helper()
		e, err := g.Edge(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return e.EvidenceChunkIDs
	}
	stored := func(key string) (inline string, rows int) {
		t.Helper()
		var c sql.NullString
		if err := s.db.QueryRow(ctx, `SELECT chunk, (SELECT count(*) FROM edge_evidence v WHERE v.client = edges.client AND v.edge_key = edges.key)
			FROM edges WHERE client = 'acme' AND key = ?`, key).Scan(&c, &rows); err != nil {
			t.Fatal(err)
		}
		return c.String, rows
	}
	if ev := evidence(key); !slices.Equal(ev, []string{"c1"}) {
		t.Fatalf("the edge written before: %v", ev)
	}
	edge := func(from, to string, chunks ...string) graph.Edge {
		return graph.Edge{Type: "assigned_to", From: from, To: to, Confidence: 0.9, Origin: graph.OriginMetadata, EvidenceChunkIDs: chunks}
	}
	if err := g.UpsertEdges(ctx, edge("jira:x-1", "person:ann", "c2")); err != nil {
		t.Fatal(err)
	}
	if inline, rows := stored(key); inline != "c2" || rows != 1 {
		t.Fatalf("after an upsert with c2: the row holds %q, %d evidence rows", inline, rows)
	}
	if err := g.UpsertEdges(ctx, edge("jira:x-1", "person:ann", "c3", "c2", "c3")); err != nil {
		t.Fatal(err)
	}
	if ev := evidence(key); !slices.Equal(ev, []string{"c1", "c2", "c3"}) {
		t.Fatalf("after c3 and c2 again: %v", ev)
	}
	if inline, rows := stored(key); inline != "c2" || rows != 2 {
		t.Fatalf("after c3 and c2 again: the row holds %q, %d evidence rows", inline, rows)
	}
	if err := g.UpsertNodes(ctx, graph.Node{Key: "jira:x-2", Type: "jira"}); err != nil {
		t.Fatal(err)
	}
	other := graph.EdgeKey("assigned_to", "jira:x-2", "person:ann")
	if err := g.UpsertEdges(ctx, edge("jira:x-2", "person:ann", "c4")); err != nil {
		t.Fatal(err)
	}
	if inline, rows := stored(other); inline != "c4" || rows != 0 {
		t.Fatalf("a new edge with one chunk: the row holds %q, %d evidence rows", inline, rows)
	}
	held := func(chunk string) graph.Held {
		return graph.Held{ChunkID: chunk, Nodes: []string{"jira:x-1", "jira:x-2", "person:ann"}}
	}
	r, err := g.RemoveEvidence(ctx, []graph.Held{held("c2")})
	if err != nil || r.EdgesUpdated != 1 || r.EdgesDeleted != 0 {
		t.Fatalf("c2 removed: %+v (%v)", r, err)
	}
	if ev := evidence(key); !slices.Equal(ev, []string{"c1", "c3"}) {
		t.Fatalf("after c2 went: %v", ev)
	}
	if r, err = g.RemoveEvidence(ctx, []graph.Held{held("c1"), held("c4")}); err != nil || r.EdgesUpdated != 1 || r.EdgesDeleted != 1 {
		t.Fatalf("c1 and c4 removed: %+v (%v)", r, err)
	}
	if _, err := g.Edge(ctx, other); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("the edge whose one chunk went: %v", err)
	}
	if r, err = g.RemoveEvidence(ctx, []graph.Held{held("c3")}); err != nil || r.EdgesDeleted != 1 {
		t.Fatalf("c3 removed: %+v (%v)", r, err)
	}
	if _, err := g.Edge(ctx, key); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("the edge whose last chunk went: %v", err)
	}
}
