package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

// statsQuery is one read of Stats and what it adds to the counts.
type statsQuery struct {
	sql  string
	scan func(rows *sql.Rows, st *store.Stats) error
}

// statsQueries are the reads of Stats: counts by state, model usage, the
// oldest waiting item of each queue with the failures by class, and the
// documents kept with warnings.
var statsQueries = []statsQuery{
	{`SELECT client, source_type, state, count(*) FROM documents GROUP BY client, source_type, state`, func(rows *sql.Rows, st *store.Stats) error {
		var client, source, state string
		var n int64
		err := rows.Scan(&client, &source, &state, &n)
		st.AddDocuments(client, store.SourceType(source), store.DocumentState(state), n)
		return err
	}},
	{`SELECT client, kind, state, count(*) FROM tasks GROUP BY client, kind, state`, func(rows *sql.Rows, st *store.Stats) error {
		var client, kind, state string
		var n int64
		err := rows.Scan(&client, &kind, &state, &n)
		st.AddTasks(client, store.TaskKind(kind), store.TaskState(state), n)
		return err
	}},
	// Tasks per kind from the index; usage from the tasks that have some
	// (a partial index): every task's row is never read.
	{`SELECT t.kind, t.n, coalesce(u.calls, 0), coalesce(u.prompt, 0), coalesce(u.output, 0)
		FROM (SELECT kind, count(*) AS n FROM tasks GROUP BY kind) t
		LEFT JOIN (SELECT kind, sum(coalesce(json_extract(usage, '$.modelCalls'), 0)) AS calls,
			sum(coalesce(json_extract(usage, '$.promptTokens'), 0)) AS prompt, sum(coalesce(json_extract(usage, '$.outputTokens'), 0)) AS output
			FROM tasks WHERE usage IS NOT NULL AND usage <> '{}' GROUP BY kind) u USING (kind)`, func(rows *sql.Rows, st *store.Stats) error {
		var kind string
		var u store.UsageTotals
		err := rows.Scan(&kind, &u.Tasks, &u.ModelCalls, &u.PromptTokens, &u.OutputTokens)
		if u.ModelCalls > 0 {
			st.ModelUsage[kind] = u
		}
		return err
	}},
	{`SELECT 'documents.' || state, min(updated_at), 0 FROM documents WHERE state = 'NEW' GROUP BY state
		UNION ALL SELECT 'tasks.' || state, min(updated_at), 0 FROM tasks WHERE state IN ('NEW', 'RETRY', 'READY_FOR_GPU') GROUP BY state
		UNION ALL SELECT 'documents.' || coalesce(json_extract(error, '$.class'), 'unknown'), 0, count(*) FROM documents WHERE state = 'QUARANTINED' GROUP BY 1
		UNION ALL SELECT 'tasks.' || coalesce(json_extract(last_error, '$.class'), 'unknown'), 0, count(*) FROM tasks WHERE state = 'FAILED' GROUP BY 1`,
		func(rows *sql.Rows, st *store.Stats) error {
			var key string
			var oldest, failures int64
			err := rows.Scan(&key, &oldest, &failures)
			if failures > 0 {
				st.Failures[key] = failures
			} else {
				st.OldestWaiting[key] = sqlitedb.Time(oldest)
			}
			return err
		}},
	{`SELECT count(*) FROM documents WHERE degraded = 1`, func(rows *sql.Rows, st *store.Stats) error {
		return rows.Scan(&st.Degraded)
	}},
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.NewStats()
	for _, q := range statsQueries {
		if err := s.each(ctx, q.sql, func(rows *sql.Rows) error { return q.scan(rows, &st) }); err != nil {
			return st, s.db.Explain("stats", err)
		}
	}
	return st, nil
}

// each runs a read query and calls scan for every row.
func (s *Store) each(ctx context.Context, query string, scan func(*sql.Rows) error) error {
	rows, err := s.db.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// sqlBacklog counts the backlog's states through the documents' claim index
// and the tasks' index by state: the entries of those states alone.
var sqlBacklog = `SELECT 'documents', state, count(*) FROM documents WHERE state IN ` + inList(store.BacklogDocumentStates) + ` GROUP BY state
	UNION ALL SELECT 'tasks', state, count(*) FROM tasks WHERE state IN ` + inList(store.BacklogTaskStates) + ` GROUP BY state`

// inList is states as an SQL list of string literals (store constants,
// never input).
func inList[S ~string](states []S) string {
	var b strings.Builder
	for i, st := range states {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + string(st) + "'")
	}
	return "(" + b.String() + ")"
}

// Backlog implements store.Store.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	b := store.Backlog{Documents: store.Counts{}, Tasks: store.Counts{}}
	err := s.each(ctx, sqlBacklog, func(rows *sql.Rows) error {
		var of, state string
		var n int64
		if err := rows.Scan(&of, &state, &n); err != nil {
			return err
		}
		if of == "documents" {
			b.Documents[state] = n
		} else {
			b.Tasks[state] = n
		}
		return nil
	})
	return b, s.db.Explain("backlog", err)
}
