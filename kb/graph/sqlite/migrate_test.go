package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/kb/graph"
)

// A graph written before nodes and edges moved to rowid tables (migrations
// 3 and 4) opens with every node, edge, prop and evidence row as it was,
// upserts merge into them as before, and the adjacency's load still reads
// an index alone.
func TestRowidMigrationKeepsTheGraph(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), FileName)
	old, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: migrations[:2]})
	if err != nil {
		t.Fatal(err)
	}
	err = old.Write(ctx, "old graph", func(tx sqlitedb.Tx) error {
		for _, q := range []string{
			`INSERT INTO nodes VALUES ('acme', 'person:ann', 'person', '{"name":"Ann"}', 10, 20), ('acme', 'jira:x-1', 'jira', '{}', 10, 10),
				('other', 'person:ann', 'person', '{"name":"Other Ann"}', 5, 5)`,
			`INSERT INTO edges VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'assigned_to', 'jira:x-1', 'person:ann', '{"since":"2015"}', 0.95, 'metadata', 10, 10)`,
			`INSERT INTO edge_evidence VALUES ('acme', 'assigned_to::jira:x-1->person:ann', 'c1')`,
			`INSERT INTO node_chunks VALUES ('acme', 'jira:x-1', 'c1')`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()

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
