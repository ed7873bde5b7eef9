package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatsReadIndexesOnly: no query of Stats reads every row of the
// documents or tasks table (a document's row carries its raw payload): each
// is answered from indexes, as SQLite's own query plan says.
func TestStatsReadIndexesOnly(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for _, q := range statsQueries {
		rows, err := s.db.Query(ctx, "EXPLAIN QUERY PLAN "+q.sql)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notUsed int
			var detail string
			if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			// A scan reads an index's entries alone (covering), or a
			// partial index's rows: the few with usage, or with warnings.
			partial := strings.HasSuffix(step, "INDEX tasks_usage") || strings.HasSuffix(step, "INDEX documents_degraded")
			if (strings.HasPrefix(step, "SCAN documents") || strings.HasPrefix(step, "SCAN tasks")) && !strings.Contains(step, "COVERING INDEX") && !partial {
				t.Errorf("%s\nscans a table: %q", strings.Join(strings.Fields(q.sql), " "), plan)
			}
		}
	}
}

// openTemp opens a store in a fresh directory, closed when the test ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{Path: filepath.Join(t.TempDir(), "jervis.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
