package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
)

// bumpIdentity moves client's identity version (in tx).
func bumpIdentity(ctx context.Context, tx sqlitedb.Tx, client string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO identity_versions (client, version) VALUES (?, 1)
		ON CONFLICT (client) DO UPDATE SET version = version + 1`, client)
	return err
}

// PutIdentityFacts implements store.Identities.
func (s *Store) PutIdentityFacts(ctx context.Context, client, source string, facts []store.IdentityFact) error {
	return s.PutIdentityFactSets(ctx, []store.IdentityFactSet{{Client: client, Source: source, Facts: facts}})
}

// PutIdentityFactSets implements store.Identities: the sets that change
// something are written in one transaction.
func (s *Store) PutIdentityFactSets(ctx context.Context, sets []store.IdentityFactSet) error {
	type change struct {
		client, source string
		want           []store.IdentityFact
	}
	var changes []change
	sources := map[string][]string{} // by client
	for _, set := range sets {
		if set.Client == "" || set.Source == "" {
			return fmt.Errorf("%w: identity facts: client and source are required", store.ErrInvalid)
		}
		sources[set.Client] = append(sources[set.Client], set.Source)
	}
	had := map[[2]string][]store.IdentityFact{} // what each client's source says now: one read per client
	for client, srcs := range sources {
		facts, err := s.factsWhere(ctx, `client = ? AND source IN (SELECT value FROM json_each(?))`, client, sqlitedb.JSONList(srcs))
		if err != nil {
			return err
		}
		for _, f := range facts {
			had[[2]string{client, f.Source}] = append(had[[2]string{client, f.Source}], f)
		}
	}
	for _, set := range sets {
		want, err := store.PrepareFacts(set.Source, set.Facts)
		if err != nil {
			return err
		}
		if !store.SameFacts(had[[2]string{set.Client, set.Source}], want) {
			changes = append(changes, change{set.Client, set.Source, want})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	now := sqlitedb.Micros(time.Now())
	return s.db.Write(ctx, "put identity facts", func(tx sqlitedb.Tx) error {
		bumped := map[string]bool{}
		for _, c := range changes {
			if _, err := tx.ExecContext(ctx, `DELETE FROM identity_facts WHERE client = ? AND source = ?`, c.client, c.source); err != nil {
				return err
			}
			for _, f := range c.want {
				if _, err := tx.ExecContext(ctx, `INSERT INTO identity_facts (client, source, ref, kind, value, evidence, seen, updated_at)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
					c.client, c.source, f.Ref, f.Kind, f.Value, f.Evidence, sqlitedb.Micros(f.Seen), now); err != nil {
					return err
				}
			}
			if !bumped[c.client] {
				bumped[c.client] = true
				if err := bumpIdentity(ctx, tx, c.client); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (s *Store) factsWhere(ctx context.Context, where string, args ...any) ([]store.IdentityFact, error) {
	var out []store.IdentityFact
	err := s.eachFactWhere(ctx, func(f store.IdentityFact) error {
		out = append(out, f)
		return nil
	}, where, args...)
	return out, err
}

// eachFactWhere calls fn with each fact matching where, in CompareFacts
// order (the primary key's, after the client).
func (s *Store) eachFactWhere(ctx context.Context, fn func(store.IdentityFact) error, where string, args ...any) error {
	rows, err := s.db.Query(ctx, `SELECT source, ref, kind, value, evidence, seen FROM identity_facts WHERE `+where+
		` ORDER BY source, ref, kind, value`, args...)
	if err != nil {
		return s.db.Explain("list identity facts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f store.IdentityFact
		var seen int64
		if err := rows.Scan(&f.Source, &f.Ref, &f.Kind, &f.Value, &f.Evidence, &seen); err != nil {
			return err
		}
		f.Seen = sqlitedb.Time(seen)
		if err := fn(f); err != nil {
			return err
		}
	}
	return rows.Err()
}

// IdentityFactsOf implements store.Identities.
func (s *Store) IdentityFactsOf(ctx context.Context, client string, refs []string, limit int) ([]store.IdentityFact, error) {
	facts, err := s.factsWhere(ctx, `client = ? AND ref IN (SELECT value FROM json_each(?))`, client, sqlitedb.JSONList(refs))
	if len(facts) > limit {
		facts = facts[:limit]
	}
	return facts, err
}

// ListIdentityFacts implements store.Identities.
func (s *Store) ListIdentityFacts(ctx context.Context, client string) ([]store.IdentityFact, error) {
	return s.factsWhere(ctx, `client = ?`, client)
}

// EachIdentityFact implements store.Identities: the facts are read from a
// cursor as fn takes them.
func (s *Store) EachIdentityFact(ctx context.Context, client string, fn func(store.IdentityFact) error) error {
	return s.eachFactWhere(ctx, fn, `client = ?`, client)
}

// pair orders a decision's two refs, so that (a, b) and (b, a) are one.
func pair(a, b string) (string, string) {
	if b < a {
		return b, a
	}
	return a, b
}

// PutIdentityDecision implements store.Identities.
func (s *Store) PutIdentityDecision(ctx context.Context, d store.IdentityDecision) error {
	if d.Client == "" || d.A == "" || d.B == "" || d.A == d.B {
		return fmt.Errorf("%w: identity decision: client and two different refs are required", store.ErrInvalid)
	}
	a, b := pair(d.A, d.B)
	return s.db.Write(ctx, "put identity decision", func(tx sqlitedb.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO identity_decisions (client, a, b, merge, who, why, at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (client, a, b) DO UPDATE SET merge = excluded.merge, who = excluded.who, why = excluded.why, at = excluded.at`,
			d.Client, a, b, d.Merge, d.Who, d.Why, sqlitedb.Micros(cmp.Or(d.At, time.Now()))); err != nil {
			return err
		}
		return bumpIdentity(ctx, tx, d.Client)
	})
}

// ListIdentityDecisions implements store.Identities.
func (s *Store) ListIdentityDecisions(ctx context.Context, client string) ([]store.IdentityDecision, error) {
	rows, err := s.db.Query(ctx, `SELECT a, b, merge, who, why, at FROM identity_decisions WHERE client = ? ORDER BY at, a, b`, client)
	if err != nil {
		return nil, s.db.Explain("list identity decisions", err)
	}
	defer rows.Close()
	var out []store.IdentityDecision
	for rows.Next() {
		d := store.IdentityDecision{Client: client}
		var at int64
		if err := rows.Scan(&d.A, &d.B, &d.Merge, &d.Who, &d.Why, &at); err != nil {
			return nil, err
		}
		d.At = sqlitedb.Time(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// ReplaceAliases implements store.Identities.
func (s *Store) ReplaceAliases(ctx context.Context, client string, aliases []store.Alias) error {
	keep := make([]string, 0, len(aliases))
	for _, a := range aliases {
		if a.Alias == "" || a.Canonical == "" || a.Stage == "" {
			return fmt.Errorf("%w: alias: alias, canonical and stage are required", store.ErrInvalid)
		}
		keep = append(keep, a.Alias)
	}
	keepJSON := sqlitedb.JSONList(keep)
	now := sqlitedb.Micros(time.Now())
	return s.db.Write(ctx, "replace aliases", func(tx sqlitedb.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM aliases WHERE client = ? AND stage <> '' AND alias NOT IN (SELECT value FROM json_each(?))`,
			client, keepJSON); err != nil {
			return err
		}
		for _, a := range aliases {
			if a.Evidence == nil {
				a.Evidence = []string{}
			}
			ev, _ := json.Marshal(a.Evidence)
			if _, err := tx.ExecContext(ctx, `INSERT INTO aliases (client, alias, canonical, updated_at, stage, confidence, evidence) VALUES (?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (client, alias) DO UPDATE SET canonical = excluded.canonical, stage = excluded.stage, confidence = excluded.confidence,
					evidence = excluded.evidence, updated_at = CASE WHEN aliases.canonical = excluded.canonical THEN aliases.updated_at ELSE excluded.updated_at END`,
				client, a.Alias, a.Canonical, now, a.Stage, a.Confidence, string(ev)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListAliases implements store.Identities.
func (s *Store) ListAliases(ctx context.Context, client string) ([]store.Alias, error) {
	rows, err := s.db.Query(ctx, `SELECT alias, canonical, stage, confidence, evidence FROM aliases WHERE client = ? ORDER BY alias`, client)
	if err != nil {
		return nil, s.db.Explain("list aliases", err)
	}
	defer rows.Close()
	var out []store.Alias
	for rows.Next() {
		var a store.Alias
		var ev string
		if err := rows.Scan(&a.Alias, &a.Canonical, &a.Stage, &a.Confidence, &ev); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(ev), &a.Evidence); err != nil {
			return nil, fmt.Errorf("alias %s evidence: %w", a.Alias, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// IdentityVersion implements store.Identities.
func (s *Store) IdentityVersion(ctx context.Context, client string) (string, error) {
	var v int64
	err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT version FROM identity_versions WHERE client = ?), 0)`, client).Scan(&v)
	if err != nil {
		return "", s.db.Explain("identity version", err)
	}
	return strconv.FormatInt(v, 10), nil
}
