package sqlite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
)

// TestStatsReadIndexesOnly: no query of Stats reads every row of the
// documents or tasks table (a document's row carries its raw payload): each
// is answered from indexes, as SQLite's own query plan says.
func TestStatsReadIndexesOnly(t *testing.T) {
	s := openTemp(t)
	for _, q := range statsQueries {
		plan := queryPlan(t, s, q.sql)
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

// A document's tasks are listed by the source document's index, not by
// walking the client's listing (a reprocess lists them for every document).
func TestDocumentTasksListedByTheirIndex(t *testing.T) {
	s := openTemp(t)
	query, args := listTasksSQL(store.TaskQuery{Client: "acme", SourceDoc: "doc_1", Limit: 10000})
	plan := queryPlan(t, s, query, args...)
	if !slices.ContainsFunc(plan, func(step string) bool { return strings.Contains(step, "USING INDEX tasks_source (source_doc=?)") }) {
		t.Errorf("plan %q, want a search of tasks_source", plan)
	}
}

// Failed tasks and quarantined documents are found by an index whose first
// column is the state, not among every task or document of the client;
// other states keep the listing index, whose order is the listing's.
func TestFailuresListedByTheirState(t *testing.T) {
	s := openTemp(t)
	has := func(plan []string, want string) bool {
		return slices.ContainsFunc(plan, func(step string) bool { return strings.Contains(step, want) })
	}
	for _, state := range []store.TaskState{store.TaskFailed, store.TaskRetry, store.TaskCancelled} {
		query, args := listTasksSQL(store.TaskQuery{Client: "acme", State: state, Limit: 100, After: &store.Position{ID: "t"}})
		if plan := queryPlan(t, s, query, args...); !has(plan, "USING INDEX tasks_state (state=?)") {
			t.Errorf("%s: plan %q, want a search of tasks_state", state, plan)
		}
	}
	query, args := listTasksSQL(store.TaskQuery{Client: "acme", State: store.TaskDone, Limit: 100})
	if plan := queryPlan(t, s, query, args...); !has(plan, "USING INDEX tasks_list (client=?)") || has(plan, "TEMP B-TREE") {
		t.Errorf("DONE: plan %q, want the listing index, unsorted", plan)
	}
	q := store.DocumentQuery{Client: "acme", State: store.DocQuarantined, Limit: 100}
	where, dargs := listFilter(map[string]string{"client": q.Client, "state": string(q.State)}, nil)
	if plan := queryPlan(t, s, `SELECT id`+listDocumentsFrom(q)+` WHERE `+where+` ORDER BY updated_at DESC, id LIMIT 100`, dargs...); !has(plan, "USING INDEX documents_claim (state=?)") {
		t.Errorf("QUARANTINED: plan %q, want a search of documents_claim", plan)
	}
}

// Documents read by ID are found by the ID's index, not among the client's
// documents.
func TestDocumentsReadByTheirID(t *testing.T) {
	s := openTemp(t)
	for _, n := range []int{1, 64, 500} {
		plan := queryPlan(t, s, getDocumentsSQL(n), make([]any, n+1)...)
		if !slices.ContainsFunc(plan, func(step string) bool {
			return strings.HasPrefix(step, "SEARCH documents USING INDEX sqlite_autoindex_documents_1 (id=?)")
		}) {
			t.Errorf("%d IDs: plan %q, want a search of the ID's index", n, plan)
		}
	}
}

// queryPlan is SQLite's plan for query: the detail of each step.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.db.Query(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
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

// An aggregate's events are read by their origin's index (a task's or a
// document's row number), or, for other aggregates, by the partial index
// by ID: no query scans the events.
func TestAggregateEventsListedByTheirIndexes(t *testing.T) {
	s := openTemp(t)
	query, args := listEventsSQL(store.EventQuery{Client: "acme", AggregateID: "t1", Limit: 10})
	plan := queryPlan(t, s, query, args...)
	var origin, byID int
	for _, step := range plan {
		switch {
		case strings.Contains(step, "events USING INDEX events_origin (aggregate=? AND origin=?"):
			origin++
		case strings.Contains(step, "events USING INDEX events_aggregate (aggregate_id=?"):
			byID++
		case strings.HasPrefix(step, "SCAN"):
			t.Errorf("a scan: %q", plan)
		}
	}
	if origin != 2 || byID != 1 {
		t.Errorf("plan %q: want two searches of events_origin and one of events_aggregate", plan)
	}
}

// The backlog is counted from the indexes by state (covering), not by
// reading every document's and task's entry.
func TestBacklogReadsItsStatesOnly(t *testing.T) {
	s := openTemp(t)
	plan := queryPlan(t, s, sqlBacklog)
	var searches int
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN") {
			t.Errorf("a scan: %q", plan)
		}
		if strings.HasPrefix(step, "SEARCH") && strings.Contains(step, "COVERING INDEX") && strings.Contains(step, "(state=?") {
			searches++
		}
	}
	if searches != 2 {
		t.Errorf("plan %q: want a covering search by state of documents and of tasks", plan)
	}
}
