package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

// SaveTaskMemory implements store.Memories.
func (s *Store) SaveTaskMemory(ctx context.Context, m store.TaskMemory) error {
	return s.SaveTaskMemories(ctx, []store.TaskMemory{m})
}

// SaveTaskMemories implements store.Memories: one transaction.
func (s *Store) SaveTaskMemories(ctx context.Context, ms []store.TaskMemory) error {
	now := time.Now()
	data := make([][]byte, len(ms))
	ms = slices.Clone(ms)
	for i := range ms {
		var err error
		if ms[i], data[i], err = store.PrepareTaskMemory(ms[i], now); err != nil {
			return err
		}
	}
	if len(ms) == 0 {
		return nil
	}
	return s.db.Write(ctx, "save task memory", func(tx sqlitedb.Tx) error {
		for i, m := range ms {
			res, err := tx.ExecContext(ctx, `INSERT INTO task_memory (task_id, client, data, updated_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (task_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at WHERE task_memory.client = excluded.client`,
				m.TaskID, m.Client, string(data[i]), sqlitedb.Micros(now))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("task memory %s belongs to another client: %w", m.TaskID, store.ErrConflict)
			}
			if _, err := appendEvent(ctx, tx, store.TaskMemoryEvent(m, now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetTaskMemory implements store.Memories.
func (s *Store) GetTaskMemory(ctx context.Context, client, taskID string) (store.TaskMemory, error) {
	var m store.TaskMemory
	var data string
	err := s.db.QueryRow(ctx, `SELECT data FROM task_memory WHERE client = ? AND task_id = ?`, client, taskID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("task memory %s: %w", taskID, store.ErrNotFound)
	}
	if err != nil {
		return m, s.db.Explain("get task memory", err)
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return m, fmt.Errorf("task memory %s: decode: %w", taskID, err)
	}
	return m, nil
}

// DeleteTaskMemory implements store.Memories.
func (s *Store) DeleteTaskMemory(ctx context.Context, client, taskID string) error {
	return s.db.Write(ctx, "delete task memory", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM task_memory WHERE client = ? AND task_id = ?`, client, taskID)
		return err
	})
}

// AppendEvent implements store.Events.
func (s *Store) AppendEvent(ctx context.Context, e store.Event) (store.Event, error) {
	if e.Aggregate == "" || e.Type == "" {
		return e, fmt.Errorf("%w: event: aggregate and type are required", store.ErrInvalid)
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return e, fmt.Errorf("%w: event data: not valid JSON", store.ErrInvalid)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = sqlitedb.Time(sqlitedb.Micros(e.At))
	err := s.db.Write(ctx, "append event", func(tx sqlitedb.Tx) error {
		var err error
		e.Seq, err = appendEvent(ctx, tx, e)
		return err
	})
	return e, err
}

// LatestEventSeq implements store.Events.
func (s *Store) LatestEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := s.db.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&seq)
	return seq, s.db.Explain("latest event", err)
}

// ListEvents implements store.Events.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	query, args := listEventsSQL(q)
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, s.db.Explain("list events", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var at int64
		var data sql.NullString
		if err := rows.Scan(&e.Seq, &at, &e.Client, &e.Aggregate, &e.AggregateID, &e.Type, &data); err != nil {
			return nil, s.db.Explain("list events", err)
		}
		e.At = sqlitedb.Time(at)
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// listEventsSQL is the query of ListEvents. An aggregate's events are read
// by their origin (the row number of the task or document named, see
// sqlInsertEvent), or by ID for those without one.
func listEventsSQL(q store.EventQuery) (string, []any) {
	var args []any
	from := "events"
	if q.AggregateID != "" {
		from = `(SELECT * FROM events INDEXED BY events_origin WHERE aggregate = 'task' AND origin = (SELECT rowid FROM tasks WHERE id = ?)
			UNION ALL SELECT * FROM events INDEXED BY events_origin WHERE aggregate = 'document' AND origin = (SELECT rowid FROM documents WHERE id = ?)
			UNION ALL SELECT * FROM events INDEXED BY events_aggregate WHERE origin IS NULL AND aggregate_id = ?)`
		args = append(args, q.AggregateID, q.AggregateID, q.AggregateID)
	}
	where := []string{"seq > ?"}
	args = append(args, q.AfterSeq)
	for _, f := range []struct{ col, v string }{{"client", q.Client}, {"aggregate", q.Aggregate}, {"aggregate_id", q.AggregateID}} {
		if f.v != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	return `SELECT seq, at, client, aggregate, aggregate_id, type, data FROM ` + from + ` WHERE ` +
		strings.Join(where, " AND ") + ` ORDER BY seq LIMIT ?`, append(args, limit)
}

// ResolveAlias implements store.Aliases.
func (s *Store) ResolveAlias(ctx context.Context, client, alias string) (string, error) {
	var canonical string
	err := s.db.QueryRow(ctx, `SELECT canonical FROM aliases WHERE client = ? AND alias = ?`, client, alias).Scan(&canonical)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("alias %q: %w", alias, store.ErrNotFound)
	}
	if err != nil {
		return "", s.db.Explain("resolve alias", err)
	}
	return canonical, nil
}

// ResolveAliases implements store.Aliases: one query a few hundred aliases.
func (s *Store) ResolveAliases(ctx context.Context, client string, aliases []string) (map[string]string, error) {
	out := make(map[string]string)
	for part := range slices.Chunk(aliases, 500) {
		rows, err := s.db.Query(ctx, `SELECT alias, canonical FROM aliases WHERE client = ? AND alias IN (`+sqlitedb.Placeholders(len(part))+`)`,
			append([]any{client}, sqlitedb.Args(part)...)...)
		if err != nil {
			return nil, s.db.Explain("resolve aliases", err)
		}
		for rows.Next() {
			var alias, canonical string
			if err := rows.Scan(&alias, &canonical); err != nil {
				_ = rows.Close()
				return nil, s.db.Explain("resolve aliases", err)
			}
			out[alias] = canonical
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, s.db.Explain("resolve aliases", err)
		}
	}
	return out, nil
}

// RecordAlias implements store.Aliases.
func (s *Store) RecordAlias(ctx context.Context, client, alias, canonical string) error {
	if client == "" || alias == "" || canonical == "" {
		return fmt.Errorf("%w: alias: client, alias and canonical are required", store.ErrInvalid)
	}
	return s.db.Write(ctx, "record alias", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO aliases (client, alias, canonical, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (client, alias) DO UPDATE SET canonical = excluded.canonical, updated_at = excluded.updated_at`,
			client, alias, canonical, sqlitedb.Micros(time.Now()))
		return err
	})
}

// GetCursor implements store.Cursors.
func (s *Store) GetCursor(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRow(ctx, `SELECT value FROM cursors WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("cursor %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return "", s.db.Explain("get cursor", err)
	}
	return v, nil
}

// CommitCursor implements store.Cursors.
func (s *Store) CommitCursor(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("%w: cursor: key is required", store.ErrInvalid)
	}
	return s.db.Write(ctx, "commit cursor", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cursors (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, sqlitedb.Micros(time.Now()))
		return err
	})
}

// PutClient implements store.Clients.
func (s *Store) PutClient(ctx context.Context, c store.Client) (bool, error) {
	if err := store.ValidateClientID(c.ID); err != nil {
		return false, err
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	ns, err := store.NormalizeNamespaces(c.Namespaces)
	if err != nil {
		return false, err
	}
	nsJSON, _ := json.Marshal(ns)
	var created bool
	err = s.db.Write(ctx, "put client", func(tx sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO clients (id, name, created_at, namespaces) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Name, sqlitedb.Micros(c.CreatedAt), string(nsJSON))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		created = n == 1
		return nil
	})
	return created, err
}

// GetClient implements store.Clients.
func (s *Store) GetClient(ctx context.Context, id string) (store.Client, error) {
	cs, err := s.listClients(ctx, `WHERE id = ?`, id)
	if err != nil {
		return store.Client{}, err
	}
	if len(cs) == 0 {
		return store.Client{}, fmt.Errorf("client %q: %w", id, store.ErrNotFound)
	}
	return cs[0], nil
}

// ListClients implements store.Clients.
func (s *Store) ListClients(ctx context.Context) ([]store.Client, error) {
	return s.listClients(ctx, `ORDER BY id`)
}

// SetClientNamespaces implements store.Clients.
func (s *Store) SetClientNamespaces(ctx context.Context, id string, namespaces []string) (store.Client, error) {
	ns, err := store.NormalizeNamespaces(namespaces)
	if err != nil {
		return store.Client{}, err
	}
	nsJSON, _ := json.Marshal(ns)
	err = s.db.Write(ctx, "set client namespaces", func(tx sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE clients SET namespaces = ? WHERE id = ?`, string(nsJSON), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("client %q: %w", id, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return store.Client{}, err
	}
	return s.GetClient(ctx, id)
}

func (s *Store) listClients(ctx context.Context, tail string, args ...any) ([]store.Client, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, created_at, namespaces FROM clients `+tail, args...)
	if err != nil {
		return nil, s.db.Explain("list clients", err)
	}
	defer rows.Close()
	var out []store.Client
	for rows.Next() {
		var c store.Client
		var at int64
		var ns string
		if err := rows.Scan(&c.ID, &c.Name, &at, &ns); err != nil {
			return nil, s.db.Explain("list clients", err)
		}
		c.CreatedAt = sqlitedb.Time(at)
		if err := json.Unmarshal([]byte(ns), &c.Namespaces); err != nil {
			return nil, fmt.Errorf("client %s: namespaces: %w", c.ID, err)
		}
		if len(c.Namespaces) == 0 {
			c.Namespaces = nil
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CreateAPIKey implements store.Clients.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if err := store.ValidateAPIKey(k); err != nil {
		return err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now()
	}
	return s.db.Write(ctx, "create api key", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, client, role, name, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			k.ID, k.Client, k.Role, k.Name, k.Hash, sqlitedb.Micros(k.CreatedAt))
		if sqlitedb.IsConstraint(err) {
			return fmt.Errorf("api key %s: %w", k.ID, store.ErrConflict)
		}
		return err
	})
}

// LookupAPIKey implements store.Clients.
func (s *Store) LookupAPIKey(ctx context.Context, hash string) (store.APIKey, error) {
	ks, err := s.listKeys(ctx, `WHERE hash = ? AND revoked_at = 0`, hash)
	if err != nil {
		return store.APIKey{}, err
	}
	if len(ks) == 0 {
		return store.APIKey{}, fmt.Errorf("api key: %w", store.ErrNotFound)
	}
	return ks[0], nil
}

// ListAPIKeys implements store.Clients.
func (s *Store) ListAPIKeys(ctx context.Context, client string) ([]store.APIKey, error) {
	return s.listKeys(ctx, `WHERE client = ? ORDER BY created_at, id`, client)
}

func (s *Store) listKeys(ctx context.Context, tail string, args ...any) ([]store.APIKey, error) {
	rows, err := s.db.Query(ctx, `SELECT id, client, role, name, hash, created_at, revoked_at FROM api_keys `+tail, args...)
	if err != nil {
		return nil, s.db.Explain("list api keys", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		var k store.APIKey
		var created, revoked int64
		if err := rows.Scan(&k.ID, &k.Client, &k.Role, &k.Name, &k.Hash, &created, &revoked); err != nil {
			return nil, s.db.Explain("list api keys", err)
		}
		k.CreatedAt, k.RevokedAt = sqlitedb.Time(created), sqlitedb.Time(revoked)
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeAPIKey implements store.Clients.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) error {
	return s.db.Write(ctx, "revoke api key", func(tx sqlitedb.Tx) error {
		var revoked int64
		err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM api_keys WHERE id = ?`, id).Scan(&revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
		}
		if err != nil || revoked != 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, sqlitedb.Micros(time.Now()), id)
		return err
	})
}

// AddLinkPattern implements store.LinkPatterns.
func (s *Store) AddLinkPattern(ctx context.Context, p store.LinkPattern) error {
	if err := store.ValidateClientID(p.Client); err != nil {
		return err
	}
	if p.Kind != store.LinkAllow && p.Kind != store.LinkBlock {
		return fmt.Errorf("%w: kind: %q is not %s or %s", store.ErrInvalid, p.Kind, store.LinkAllow, store.LinkBlock)
	}
	if strings.TrimSpace(p.Pattern) == "" || len(p.Pattern) > 2048 {
		return fmt.Errorf("%w: pattern: empty or longer than 2048", store.ErrInvalid)
	}
	return s.db.Write(ctx, "add link pattern", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO link_patterns (client, kind, pattern, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			p.Client, p.Kind, strings.ToLower(strings.TrimSpace(p.Pattern)), sqlitedb.Micros(time.Now()))
		return err
	})
}

// RemoveLinkPattern implements store.LinkPatterns.
func (s *Store) RemoveLinkPattern(ctx context.Context, client, kind, pattern string) error {
	return s.db.Write(ctx, "remove link pattern", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM link_patterns WHERE client = ? AND kind = ? AND pattern = ?`, client, kind, strings.ToLower(strings.TrimSpace(pattern)))
		return err
	})
}

// ListLinkPatterns implements store.LinkPatterns.
func (s *Store) ListLinkPatterns(ctx context.Context, client string) ([]store.LinkPattern, error) {
	rows, err := s.db.Query(ctx, `SELECT client, kind, pattern, created_at FROM link_patterns WHERE client = ? ORDER BY kind, pattern`, client)
	if err != nil {
		return nil, s.db.Explain("list link patterns", err)
	}
	defer rows.Close()
	var out []store.LinkPattern
	for rows.Next() {
		var p store.LinkPattern
		var at int64
		if err := rows.Scan(&p.Client, &p.Kind, &p.Pattern, &at); err != nil {
			return nil, err
		}
		p.CreatedAt = sqlitedb.Time(at)
		out = append(out, p)
	}
	return out, rows.Err()
}

// GetModelAnswer implements store.ModelCache.
func (s *Store) GetModelAnswer(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRow(ctx, `SELECT answer FROM model_answers WHERE key = ?`, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("model answer %s: %w", key, store.ErrNotFound)
	}
	return b, s.db.Explain("get model answer", err)
}

// PutModelAnswer implements store.ModelCache.
func (s *Store) PutModelAnswer(ctx context.Context, key string, answer []byte) error {
	return s.db.Write(ctx, "put model answer", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO model_answers (key, answer, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET answer = excluded.answer, updated_at = excluded.updated_at`, key, answer, sqlitedb.Micros(time.Now()))
		return err
	})
}

// PutEncoder implements store.Encoders.
func (s *Store) PutEncoder(ctx context.Context, e store.Encoder) error {
	if err := store.ValidateEncoder(e); err != nil {
		return err
	}
	return s.db.Write(ctx, "put encoder", func(tx sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO encoders (client, name, model, items, trained_at, replay_pending, documents) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (client) DO UPDATE SET name = excluded.name, model = excluded.model, items = excluded.items, trained_at = excluded.trained_at,
				replay_pending = excluded.replay_pending, documents = excluded.documents`,
			e.Client, e.Name, e.Model, e.Items, sqlitedb.Micros(e.TrainedAt), e.ReplayPending, e.Documents)
		return err
	})
}

// GetEncoder implements store.Encoders.
func (s *Store) GetEncoder(ctx context.Context, client string) (store.Encoder, error) {
	e := store.Encoder{Client: client}
	var at int64
	err := s.db.QueryRow(ctx, `SELECT name, model, items, trained_at, replay_pending, documents FROM encoders WHERE client = ?`, client).Scan(&e.Name, &e.Model, &e.Items, &at, &e.ReplayPending, &e.Documents)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("encoder of %s: %w", client, store.ErrNotFound)
	}
	e.TrainedAt = sqlitedb.Time(at)
	return e, s.db.Explain("get encoder", err)
}

// EncoderName implements store.Encoders.
func (s *Store) EncoderName(ctx context.Context, client string) (string, error) {
	var name string
	err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT name FROM encoders WHERE client = ?), '')`, client).Scan(&name)
	return name, s.db.Explain("encoder name", err)
}

// ListEncoders implements store.Encoders.
func (s *Store) ListEncoders(ctx context.Context) ([]store.Encoder, error) {
	rows, err := s.db.Query(ctx, `SELECT client, name, items, trained_at, replay_pending, documents FROM encoders ORDER BY client`)
	if err != nil {
		return nil, s.db.Explain("list encoders", err)
	}
	defer rows.Close()
	var out []store.Encoder
	for rows.Next() {
		var e store.Encoder
		var at int64
		if err := rows.Scan(&e.Client, &e.Name, &e.Items, &at, &e.ReplayPending, &e.Documents); err != nil {
			return nil, err
		}
		e.TrainedAt = sqlitedb.Time(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// EncoderReplayed implements store.Encoders.
func (s *Store) EncoderReplayed(ctx context.Context, client, name string) error {
	return s.db.Write(ctx, "encoder replayed", func(tx sqlitedb.Tx) error {
		var have string
		err := tx.QueryRowContext(ctx, `SELECT name FROM encoders WHERE client = ?`, client).Scan(&have)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("encoder of %s: %w", client, store.ErrNotFound)
		}
		if err != nil || have != name {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE encoders SET replay_pending = 0 WHERE client = ?`, client)
		return err
	})
}
