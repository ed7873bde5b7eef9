package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
//
// A source's facts are one row (identity_sources: the facts in key order,
// encodeFacts), and each ref they name one row of identity_refs, by which
// IdentityFactsOf finds them. A row a fact, with an index by ref, was two
// B-tree entries of about 200 bytes for each fact, and a mail names about
// a dozen people (17 facts a message on the dev mailing list): those rows
// were a tenth of the list's pipeline CPU, and the pipeline store's writer
// waited behind them (BENCHMARKS.md, forty-seventh round).
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
		err := s.eachSourceWhere(ctx, s.db.Reads(), func(source string, facts []store.IdentityFact) error {
			had[[2]string{client, source}] = facts
			return nil
		}, `client = ? AND source IN (SELECT value FROM json_each(?))`, client, sqlitedb.JSONList(srcs))
		if err != nil {
			return err
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
			// What the source says as of this transaction (the read above
			// was outside it), for the refs it no longer names.
			var before []store.IdentityFact
			err := s.eachSourceWhere(ctx, tx, func(_ string, facts []store.IdentityFact) error {
				before = facts
				return nil
			}, `client = ? AND source = ?`, c.client, c.source)
			if err != nil {
				return err
			}
			refs := factRefs(c.want)
			for ref := range factRefs(before) {
				if refs[ref] {
					delete(refs, ref) // named before and now: its row stays
					continue
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM identity_refs WHERE client = ? AND ref = ? AND source = ?`, c.client, ref, c.source); err != nil {
					return err
				}
			}
			for ref := range refs {
				if _, err := tx.ExecContext(ctx, `INSERT INTO identity_refs (client, ref, source) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, c.client, ref, c.source); err != nil {
					return err
				}
			}
			if len(c.want) == 0 {
				_, err = tx.ExecContext(ctx, `DELETE FROM identity_sources WHERE client = ? AND source = ?`, c.client, c.source)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO identity_sources (client, source, facts, updated_at) VALUES (?, ?, ?, ?)
					ON CONFLICT (client, source) DO UPDATE SET facts = excluded.facts, updated_at = excluded.updated_at`,
					c.client, c.source, encodeFacts(c.want), now)
			}
			if err != nil {
				return err
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

// factRefs are the refs facts name.
func factRefs(facts []store.IdentityFact) map[string]bool {
	refs := make(map[string]bool, len(facts))
	for _, f := range facts {
		refs[f.Ref] = true
	}
	return refs
}

// factFields is how many strings encodeFacts writes a fact as.
const factFields = 5

// encodeFacts writes one source's facts (prepared: in key order) as a
// JSON array of strings, factFields for each — ref, kind, value, evidence
// and when it was seen (Unix microseconds, in decimal) —, every byte kept
// as it is (sqlitedb.JSONList).
func encodeFacts(facts []store.IdentityFact) string {
	flat := make([]string, 0, factFields*len(facts))
	for _, f := range facts {
		flat = append(flat, f.Ref, f.Kind, f.Value, f.Evidence, strconv.FormatInt(sqlitedb.Micros(f.Seen), 10))
	}
	return sqlitedb.JSONList(flat)
}

// decodeFacts reads back what encodeFacts wrote for source.
func decodeFacts(source, s string) ([]store.IdentityFact, error) {
	flat, err := sqlitedb.DecodeJSONList(s)
	if err != nil || len(flat)%factFields != 0 {
		return nil, fmt.Errorf("identity facts of %s: not %d strings a fact: %v", source, factFields, err)
	}
	facts := make([]store.IdentityFact, 0, len(flat)/factFields)
	for i := 0; i < len(flat); i += factFields {
		seen, err := strconv.ParseInt(flat[i+4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("identity facts of %s: seen: %w", source, err)
		}
		facts = append(facts, store.IdentityFact{Source: source, Ref: flat[i], Kind: flat[i+1], Value: flat[i+2], Evidence: flat[i+3], Seen: sqlitedb.Time(seen)})
	}
	return facts, nil
}

// querier is what eachSourceWhere reads through: the read pool or a write
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// eachSourceWhere calls fn with the facts of each source matching where,
// by source (byte order), each source's facts in key order: CompareFacts
// order, after the client.
func (s *Store) eachSourceWhere(ctx context.Context, q querier, fn func(source string, facts []store.IdentityFact) error, where string, args ...any) error {
	rows, err := q.QueryContext(ctx, `SELECT source, facts FROM identity_sources WHERE `+where+` ORDER BY source`, args...)
	if err != nil {
		return s.db.Explain("list identity facts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var source, encoded string
		if err := rows.Scan(&source, &encoded); err != nil {
			return err
		}
		facts, err := decodeFacts(source, encoded)
		if err != nil {
			return err
		}
		if err := fn(source, facts); err != nil {
			return err
		}
	}
	return rows.Err()
}

// eachFactWhere calls fn with each fact of the sources matching where
// whose ref keep takes (nil: every fact), in CompareFacts order.
func (s *Store) eachFactWhere(ctx context.Context, keep map[string]bool, fn func(store.IdentityFact) error, where string, args ...any) error {
	return s.eachSourceWhere(ctx, s.db.Reads(), func(_ string, facts []store.IdentityFact) error {
		for _, f := range facts {
			if keep != nil && !keep[f.Ref] {
				continue
			}
			if err := fn(f); err != nil {
				return err
			}
		}
		return nil
	}, where, args...)
}

// errEnough stops a read that has what it wanted.
var errEnough = errors.New("enough")

// IdentityFactsOf implements store.Identities: the sources that name one of
// refs, by identity_refs, and their facts about refs.
func (s *Store) IdentityFactsOf(ctx context.Context, client string, refs []string, limit int) ([]store.IdentityFact, error) {
	keep := map[string]bool{}
	for _, r := range refs {
		keep[r] = true
	}
	var out []store.IdentityFact
	err := s.eachFactWhere(ctx, keep, func(f store.IdentityFact) error {
		if len(out) >= limit {
			return errEnough
		}
		out = append(out, f)
		return nil
	}, `client = ? AND source IN (SELECT source FROM identity_refs WHERE client = ? AND ref IN (SELECT value FROM json_each(?)))`,
		client, client, sqlitedb.JSONList(refs))
	if errors.Is(err, errEnough) {
		err = nil
	}
	return out, err
}

// ListIdentityFacts implements store.Identities.
func (s *Store) ListIdentityFacts(ctx context.Context, client string) ([]store.IdentityFact, error) {
	var out []store.IdentityFact
	err := s.eachFactWhere(ctx, nil, func(f store.IdentityFact) error {
		out = append(out, f)
		return nil
	}, `client = ?`, client)
	return out, err
}

// EachIdentityFact implements store.Identities: the facts are read from a
// cursor, a source at a time, as fn takes them.
func (s *Store) EachIdentityFact(ctx context.Context, client string, fn func(store.IdentityFact) error) error {
	return s.eachFactWhere(ctx, nil, fn, `client = ?`, client)
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
