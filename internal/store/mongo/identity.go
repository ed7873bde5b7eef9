package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/jervis-dev/jervis/internal/store"
)

type factRecord struct {
	ID       string `bson:"_id"`
	Client   string `bson:"client"`
	Source   string `bson:"source"`
	Ref      string `bson:"ref"`
	Kind     string `bson:"kind"`
	Value    string `bson:"value"`
	Evidence string `bson:"evidence"`
	Seen     int64  `bson:"seen"`
}

func (r factRecord) fact() store.IdentityFact {
	return store.IdentityFact{Ref: r.Ref, Kind: r.Kind, Value: r.Value, Source: r.Source, Evidence: r.Evidence, Seen: fromMicros(r.Seen)}
}

// identityVersion is the counters document moved by every change of a
// client's facts or decisions.
func identityVersion(client string) string { return "identity\x00" + client }

func (s *Store) bumpIdentity(ctx context.Context, client string) error {
	_, err := s.counters.UpdateOne(ctx, bson.M{"_id": identityVersion(client)}, bson.M{"$inc": bson.M{"seq": 1}}, options.Update().SetUpsert(true))
	return err
}

// findFacts returns the facts filter finds, in store.CompareFacts's order.
func (s *Store) findFacts(ctx context.Context, filter bson.M) ([]store.IdentityFact, error) {
	out := []store.IdentityFact{}
	err := s.eachFact(ctx, filter, func(f store.IdentityFact) error {
		out = append(out, f)
		return nil
	})
	return out, err
}

// PutIdentityFacts implements store.Identities, as PutIdentityFactSets
// does for one set.
func (s *Store) PutIdentityFacts(ctx context.Context, client, source string, facts []store.IdentityFact) error {
	return s.PutIdentityFactSets(ctx, []store.IdentityFactSet{{Client: client, Source: source, Facts: facts}})
}

// PutIdentityFactSets implements store.Identities: every set checked first,
// the facts the sources had read by one query, and for each source whose
// facts changed its new facts upserted and its others removed by one
// unordered bulk write; then the version of each client with a change is
// moved. A crash part way is finished by the task's retry (each step is
// idempotent). A source named twice ends with its last set.
func (s *Store) PutIdentityFactSets(ctx context.Context, sets []store.IdentityFactSet) error {
	type key struct{ client, source string }
	want := map[key][]store.IdentityFact{}
	var order []key
	for _, set := range sets {
		if set.Client == "" || set.Source == "" {
			return fmt.Errorf("%w: identity facts: client and source are required", store.ErrInvalid)
		}
		facts, err := store.PrepareFacts(set.Source, set.Facts)
		if err != nil {
			return err
		}
		k := key{set.Client, set.Source}
		if _, ok := want[k]; !ok {
			order = append(order, k)
		}
		want[k] = facts
	}
	if len(order) == 0 {
		return nil
	}
	sources := make(bson.A, len(order))
	for i, k := range order {
		sources[i] = bson.M{"client": k.client, "source": k.source}
	}
	cur, err := s.facts.Find(ctx, bson.M{"$or": sources}, options.Find().SetSort(factOrder))
	if err != nil {
		return fmt.Errorf("put identity facts: %w", err)
	}
	var recs []factRecord
	if err := cur.All(ctx, &recs); err != nil {
		return fmt.Errorf("put identity facts: %w", err)
	}
	had := map[key][]store.IdentityFact{}
	for _, r := range recs {
		k := key{r.Client, r.Source}
		had[k] = append(had[k], r.fact())
	}
	var models []mgo.WriteModel
	var stale bson.A     // each changed source's facts it no longer states
	var changed []string // clients
	for _, k := range order {
		if store.SameFacts(had[k], want[k]) {
			continue
		}
		ids := make([]string, 0, len(want[k]))
		for _, f := range want[k] {
			id := pairKey(k.client, k.source+"\x00"+f.Ref+"\x00"+f.Kind+"\x00"+f.Value)
			ids = append(ids, id)
			r := factRecord{ID: id, Client: k.client, Source: k.source, Ref: f.Ref, Kind: f.Kind, Value: f.Value, Evidence: f.Evidence, Seen: micros(f.Seen)}
			models = append(models, mgo.NewReplaceOneModel().SetFilter(bson.M{"_id": id}).SetReplacement(r).SetUpsert(true))
		}
		stale = append(stale, bson.M{"client": k.client, "source": k.source, "_id": bson.M{"$nin": ids}})
		if !slices.Contains(changed, k.client) {
			changed = append(changed, k.client)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	models = append(models, mgo.NewDeleteManyModel().SetFilter(bson.M{"$or": stale}))
	if _, err := s.bulkWrite(ctx, s.facts, models); err != nil {
		return fmt.Errorf("put identity facts: %w", err)
	}
	for _, client := range changed {
		if err := s.bumpIdentity(ctx, client); err != nil {
			return fmt.Errorf("put identity facts: %w", err)
		}
	}
	return nil
}

// IdentityFactsOf implements store.Identities.
func (s *Store) IdentityFactsOf(ctx context.Context, client string, refs []string, limit int) ([]store.IdentityFact, error) {
	facts, err := s.findFacts(ctx, bson.M{"client": client, "ref": bson.M{"$in": refs}})
	if len(facts) > limit {
		facts = facts[:limit]
	}
	return facts, err
}

// ListIdentityFacts implements store.Identities.
func (s *Store) ListIdentityFacts(ctx context.Context, client string) ([]store.IdentityFact, error) {
	return s.findFacts(ctx, bson.M{"client": client})
}

// factOrder is store.CompareFacts's order, which the "order" index gives
// within a client: strings compare as their bytes (the simple collation)
// as Go's do.
var factOrder = bson.D{{Key: "source", Value: 1}, {Key: "ref", Value: 1}, {Key: "kind", Value: 1}, {Key: "value", Value: 1}}

// EachIdentityFact implements store.Identities: the facts are read from a
// cursor, in the server's order, as fn takes them (a client's facts read
// whole were about 200 MB at once at 100,000 documents).
func (s *Store) EachIdentityFact(ctx context.Context, client string, fn func(store.IdentityFact) error) error {
	return s.eachFact(ctx, bson.M{"client": client}, fn)
}

// eachFact calls fn with the facts filter finds, in store.CompareFacts's
// order (sorted by the server), from a cursor.
func (s *Store) eachFact(ctx context.Context, filter bson.M, fn func(store.IdentityFact) error) error {
	cur, err := s.facts.Find(ctx, filter, options.Find().SetSort(factOrder))
	if err != nil {
		return fmt.Errorf("identity facts: %w", err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var r factRecord
		if err := cur.Decode(&r); err != nil {
			return fmt.Errorf("identity facts: %w", err)
		}
		if err := fn(r.fact()); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("identity facts: %w", err)
	}
	return nil
}

type decisionRecord struct {
	ID     string `bson:"_id"`
	Client string `bson:"client"`
	A      string `bson:"a"`
	B      string `bson:"b"`
	Merge  bool   `bson:"merge"`
	Who    string `bson:"who"`
	Why    string `bson:"why"`
	At     int64  `bson:"at"`
}

// PutIdentityDecision implements store.Identities.
func (s *Store) PutIdentityDecision(ctx context.Context, d store.IdentityDecision) error {
	if d.Client == "" || d.A == "" || d.B == "" || d.A == d.B {
		return fmt.Errorf("%w: identity decision: client and two different refs are required", store.ErrInvalid)
	}
	a, b := min(d.A, d.B), max(d.A, d.B)
	id := pairKey(d.Client, a+"\x00"+b)
	r := decisionRecord{ID: id, Client: d.Client, A: a, B: b, Merge: d.Merge, Who: d.Who, Why: d.Why, At: micros(cmp.Or(d.At, time.Now()))}
	if _, err := s.decisions.ReplaceOne(ctx, bson.M{"_id": id}, r, options.Replace().SetUpsert(true)); err != nil {
		return fmt.Errorf("put identity decision: %w", err)
	}
	return s.bumpIdentity(ctx, d.Client)
}

// ListIdentityDecisions implements store.Identities.
func (s *Store) ListIdentityDecisions(ctx context.Context, client string) ([]store.IdentityDecision, error) {
	cur, err := s.decisions.Find(ctx, bson.M{"client": client}, options.Find().SetSort(bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list identity decisions: %w", err)
	}
	var recs []decisionRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list identity decisions: %w", err)
	}
	out := make([]store.IdentityDecision, len(recs))
	for i, r := range recs {
		out[i] = store.IdentityDecision{Client: r.Client, A: r.A, B: r.B, Merge: r.Merge, Who: r.Who, Why: r.Why, At: fromMicros(r.At)}
	}
	return out, nil
}

type aliasRecord struct {
	Alias      string   `bson:"alias"`
	Canonical  string   `bson:"canonical"`
	Stage      string   `bson:"stage"`
	Confidence float64  `bson:"confidence"`
	Evidence   []string `bson:"evidence"`
}

// ReplaceAliases implements store.Identities.
func (s *Store) ReplaceAliases(ctx context.Context, client string, aliases []store.Alias) error {
	ids := make([]string, 0, len(aliases))
	for _, a := range aliases {
		if a.Alias == "" || a.Canonical == "" || a.Stage == "" {
			return fmt.Errorf("%w: alias: alias, canonical and stage are required", store.ErrInvalid)
		}
		ids = append(ids, pairKey(client, a.Alias))
	}
	now := micros(time.Now())
	for _, a := range aliases {
		ev := a.Evidence
		if ev == nil {
			ev = []string{}
		}
		if _, err := s.aliases.UpdateOne(ctx, bson.M{"_id": pairKey(client, a.Alias)}, bson.M{"$set": bson.M{"client": client, "alias": a.Alias,
			"canonical": a.Canonical, "stage": a.Stage, "confidence": a.Confidence, "evidence": ev, "updatedAt": now}},
			options.Update().SetUpsert(true)); err != nil {
			return fmt.Errorf("replace aliases: %w", err)
		}
	}
	_, err := s.aliases.DeleteMany(ctx, bson.M{"client": client, "stage": bson.M{"$exists": true, "$ne": ""}, "_id": bson.M{"$nin": ids}})
	if err != nil {
		return fmt.Errorf("replace aliases: %w", err)
	}
	return nil
}

// ListAliases implements store.Identities.
func (s *Store) ListAliases(ctx context.Context, client string) ([]store.Alias, error) {
	cur, err := s.aliases.Find(ctx, bson.M{"client": client}, options.Find().SetSort(bson.D{{Key: "alias", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list aliases: %w", err)
	}
	var recs []aliasRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list aliases: %w", err)
	}
	out := make([]store.Alias, len(recs))
	for i, r := range recs {
		out[i] = store.Alias{Alias: r.Alias, Canonical: r.Canonical, Stage: r.Stage, Confidence: r.Confidence, Evidence: r.Evidence}
		if r.Stage == "" {
			out[i].Confidence = 1
		}
		if out[i].Evidence == nil {
			out[i].Evidence = []string{}
		}
	}
	return out, nil
}

// IdentityVersion implements store.Identities.
func (s *Store) IdentityVersion(ctx context.Context, client string) (string, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := s.counters.FindOne(ctx, bson.M{"_id": identityVersion(client)}).Decode(&c)
	if err != nil && !errors.Is(err, mgo.ErrNoDocuments) {
		return "", fmt.Errorf("identity version: %w", err)
	}
	return strconv.FormatInt(c.Seq, 10), nil
}
