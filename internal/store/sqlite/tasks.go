package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

const taskColumns = `id, kind, client, source_doc, payload, correlation_id, priority, state, attempts, max_attempts,
	run_after, lease_owner, lease_until, last_error, budget, usage, result, created_at, updated_at`

const (
	sqlClaimTasks      = `SELECT ` + taskColumns + ` FROM tasks WHERE stage = ? AND run_after <= ? AND priority >= ? ORDER BY priority DESC, run_after LIMIT ?`
	sqlClaimTaskUpdate = `UPDATE tasks SET state = ?, lease_owner = ?, lease_until = ?, attempts = ?, updated_at = ? WHERE id = ?`
	sqlTaskByID        = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`
	sqlEnqueueTask     = `INSERT INTO tasks (` + taskColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	sqlTransitionTask  = `UPDATE tasks SET state = ?, lease_owner = '', lease_until = 0, run_after = ?, attempts = ?, last_error = ?, result = ?, usage = ?, updated_at = ?, priority = ? WHERE id = ?`
)

func scanTask(row scanner) (store.Task, error) {
	var (
		t                                      store.Task
		payload, lastErr, budget, usage        sql.NullString
		runAfter, leaseUntil, created, updated int64
		result                                 []byte
	)
	err := row.Scan(&t.ID, &t.Kind, &t.Client, &t.SourceDoc, &payload, &t.CorrelationID, &t.Priority, &t.State,
		&t.Attempts, &t.MaxAttempts, &runAfter, &t.LeaseOwner, &leaseUntil, &lastErr, &budget, &usage, &result,
		&created, &updated)
	if err != nil {
		return t, err
	}
	if len(result) > 0 {
		t.Result = json.RawMessage(result)
	}
	if payload.Valid {
		t.Payload = json.RawMessage(payload.String)
	}
	if budget.Valid {
		if err := json.Unmarshal([]byte(budget.String), &t.Budget); err != nil {
			return t, fmt.Errorf("task %s: decode budget: %w", t.ID, err)
		}
	}
	if usage.Valid {
		if err := json.Unmarshal([]byte(usage.String), &t.Usage); err != nil {
			return t, fmt.Errorf("task %s: decode usage: %w", t.ID, err)
		}
	}
	t.RunAfter, t.LeaseUntil, t.CreatedAt, t.UpdatedAt = sqlitedb.Time(runAfter), sqlitedb.Time(leaseUntil), sqlitedb.Time(created), sqlitedb.Time(updated)
	t.LastError, err = scanError(lastErr)
	return t, err
}

func queryTasks(ctx context.Context, q querier, query string, args ...any) ([]store.Task, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// EnqueueTasks implements store.Tasks.
func (s *Store) EnqueueTasks(ctx context.Context, tasks ...store.Task) (int, error) {
	now := time.Now()
	prepared := make([]store.Task, len(tasks))
	for i, t := range tasks {
		var err error
		if prepared[i], err = store.PrepareTask(t, now); err != nil {
			return 0, fmt.Errorf("task %d: %w", i, err)
		}
		if len(t.Payload) > 0 && !json.Valid(t.Payload) {
			return 0, fmt.Errorf("task %d: %w: payload: not valid JSON", i, store.ErrInvalid)
		}
	}
	inserted := 0
	err := s.db.Write(ctx, "enqueue tasks", func(tx sqlitedb.Tx) error {
		inserted = 0
		for _, t := range prepared {
			budget, err := jsonCol(t.Budget)
			if err != nil {
				return err
			}
			var payload any
			if len(t.Payload) > 0 {
				payload = string(t.Payload)
			}
			res, err := tx.ExecContext(ctx, sqlEnqueueTask,
				t.ID, t.Kind, t.Client, t.SourceDoc, payload, t.CorrelationID, t.Priority, t.State, 0, t.MaxAttempts,
				0, "", 0, nil, budget, nil, nil, sqlitedb.Micros(now), sqlitedb.Micros(now))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			inserted++
			if _, err := appendEvent(ctx, tx, store.Event{At: now, Client: t.Client, Aggregate: store.AggregateTask, AggregateID: t.ID, Type: store.EventTaskCreated, Data: store.TaskCreatedData(t)}); err != nil {
				return err
			}
		}
		return nil
	})
	return inserted, err
}

// GetTask implements store.Tasks.
func (s *Store) GetTask(ctx context.Context, client, id string) (store.Task, error) {
	ts, err := queryTasks(ctx, s.db.Reads(), `SELECT `+taskColumns+` FROM tasks WHERE client = ? AND id = ?`, client, id)
	if err != nil {
		return store.Task{}, s.db.Explain("get task", err)
	}
	if len(ts) == 0 {
		return store.Task{}, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	return ts[0], nil
}

// ClaimTasks implements store.Tasks.
func (s *Store) ClaimTasks(ctx context.Context, stage store.Stage, c store.Claim) ([]store.Task, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !stage.Valid() {
		return nil, fmt.Errorf("%w: stage %q", store.ErrInvalid, stage)
	}
	var out []store.Task
	err := s.db.Write(ctx, "claim tasks", func(tx sqlitedb.Tx) error {
		var err error
		out, err = queryTasks(ctx, tx, sqlClaimTasks, stage, sqlitedb.Micros(c.Now), c.MinPriority(), c.Limit)
		if err != nil {
			return err
		}
		running := stage.Running()
		for i := range out {
			t := &out[i]
			from := t.State
			t.State, t.LeaseOwner, t.LeaseUntil, t.UpdatedAt = running, c.Owner, c.LeaseUntil, c.Now
			t.Attempts++
			if _, err := tx.ExecContext(ctx, sqlClaimTaskUpdate, t.State, t.LeaseOwner, sqlitedb.Micros(t.LeaseUntil), t.Attempts, sqlitedb.Micros(c.Now), t.ID); err != nil {
				return err
			}
			if _, err := appendEvent(ctx, tx, store.TaskStateEvent(*t, from, c.Owner, "claim", c.Now)); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// ExtendTaskLeases implements store.Tasks.
func (s *Store) ExtendTaskLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error) {
	return s.extendLeases(ctx, "tasks", []string{string(store.TaskQualifying), string(store.TaskExecution)}, owner, ids, until)
}

// TransitionTasks implements store.Tasks.
func (s *Store) TransitionTasks(ctx context.Context, ts []store.TaskTransition) error {
	var skipped []error
	err := s.db.Write(ctx, "transition tasks", func(tx sqlitedb.Tx) error {
		skipped = skipped[:0]
		now := time.Now()
		for _, t := range ts {
			err := transitionTask(ctx, tx, t, now)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrIllegalTransition) || errors.Is(err, store.ErrNotFound) {
				skipped = append(skipped, err)
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(skipped...)
}

func transitionTask(ctx context.Context, tx sqlitedb.Tx, t store.TaskTransition, now time.Time) error {
	ts, err := queryTasks(ctx, tx, sqlTaskByID, t.ID)
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		return fmt.Errorf("task %s: %w", t.ID, store.ErrNotFound)
	}
	if err := store.CheckTaskTransition(ts[0], t); err != nil {
		return err
	}
	cur := store.ApplyTaskTransition(ts[0], t, now)
	usage, err := jsonCol(cur.Usage)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlTransitionTask, cur.State, sqlitedb.Micros(cur.RunAfter), cur.Attempts, errorCol(cur.LastError), []byte(cur.Result), usage, sqlitedb.Micros(now), cur.Priority, cur.ID); err != nil {
		return err
	}
	_, err = appendEvent(ctx, tx, store.TaskStateEvent(cur, t.From, t.Owner, t.Reason, now))
	return err
}

// RescueTasks implements store.Tasks.
func (s *Store) RescueTasks(ctx context.Context, stage store.Stage, now time.Time) (int, error) {
	if !stage.Valid() {
		return 0, fmt.Errorf("%w: stage %q", store.ErrInvalid, stage)
	}
	n := 0
	err := s.db.Write(ctx, "rescue tasks", func(tx sqlitedb.Tx) error {
		ts, err := queryTasks(ctx, tx, `SELECT `+taskColumns+` FROM tasks WHERE lease_until > 0 AND lease_until < ? AND state = ?`,
			sqlitedb.Micros(now), stage.Running())
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := transitionTask(ctx, tx, store.RescueTask(t, stage, now), now); err != nil {
				return err
			}
		}
		n = len(ts)
		return nil
	})
	return n, err
}

// ListTasks implements store.Tasks.
func (s *Store) ListTasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	query, args := listTasksSQL(q)
	ts, err := queryTasks(ctx, s.db.Reads(), query, args...)
	if err != nil {
		return nil, s.db.Explain("list tasks", err)
	}
	return ts, nil
}

// listTasksSQL is the query of ListTasks. A document's tasks are read by
// the source document's index: ordered as the listing is, the client's
// listing index would be walked whole instead, sorting nothing but reading
// every task of the client — for each document a reprocess replays (5,128
// Jira issues: 3 min 40 s for a dry run).
//
// A listing of a state that only failure reaches (listedByState) walks that
// state's index instead: by the client's listing index it read every task of
// the client to find the few in it (337,513 tasks, 3 of them FAILED: 383 ms a
// page, 45 µs by tasks_state). That index holds every client's tasks in the
// state, few by definition; its order is the listing's but for the ID among
// equal times, which SQLite sorts per time, stopping at the limit. Other
// states keep the listing index: most of
// a client's tasks are in them, so a page is found early, and an index by
// (client, state) would be one more entry moved at every transition of the
// pipeline's hot path (dropped in migration 15).
func listTasksSQL(q store.TaskQuery) (string, []any) {
	where, args := listFilter(map[string]string{"client": q.Client, "state": string(q.State), "kind": string(q.Kind), "source_doc": q.SourceDoc}, q.After)
	from := "tasks"
	switch {
	case q.SourceDoc != "":
		from = "tasks INDEXED BY tasks_source"
	case listedByState[q.State]:
		from = "tasks INDEXED BY tasks_state"
	}
	return `SELECT ` + taskColumns + ` FROM ` + from + ` WHERE ` + where + ` ORDER BY updated_at DESC, id LIMIT ?`, append(args, listLimit(q.Limit))
}

// listedByState are the task states a listing finds by the index by state:
// those only a failure or an operator leads to, few in any store.
var listedByState = map[store.TaskState]bool{store.TaskRetry: true, store.TaskFailed: true, store.TaskCancelled: true}
