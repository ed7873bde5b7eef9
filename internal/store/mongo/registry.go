package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/jervis-dev/jervis/internal/store"
)

// SaveTaskMemory implements store.Memories. Order: upsert the memory (an
// ID held by another client collides on the primary key), then append its
// event.
func (s *Store) SaveTaskMemory(ctx context.Context, m store.TaskMemory) error {
	return s.SaveTaskMemories(ctx, []store.TaskMemory{m})
}

// SaveTaskMemories implements store.Memories: every memory checked first,
// then upserted by one unordered bulk write and their events appended by
// one insert (each is idempotent; a failure part way is finished by the
// retry). A memory whose task ID another client holds is not saved, and
// the first of those is the error, after the others are saved.
func (s *Store) SaveTaskMemories(ctx context.Context, ms []store.TaskMemory) error {
	now := time.Now()
	ms = slices.Clone(ms)
	models := make([]mgo.WriteModel, len(ms))
	for i := range ms {
		m, data, err := store.PrepareTaskMemory(ms[i], now)
		if err != nil {
			return err
		}
		ms[i] = m
		models[i] = mgo.NewUpdateOneModel().SetFilter(bson.M{"_id": m.TaskID, "client": m.Client}).
			SetUpdate(bson.M{"$set": bson.M{"data": string(data), "updatedAt": micros(now)}}).SetUpsert(true)
	}
	if len(ms) == 0 {
		return nil
	}
	_, err := s.bulkWrite(ctx, s.memories, models)
	refused, ok := duplicateIndexes(err)
	if !ok {
		return fmt.Errorf("save task memories: %w", err)
	}
	evs := make([]eventRecord, 0, len(ms))
	for i, m := range ms {
		if !refused[i] {
			evs = append(evs, toEventRecord(newID(), store.TaskMemoryEvent(m, now)))
		}
	}
	if err := s.insertEvents(ctx, evs); err != nil {
		return err
	}
	for i, m := range ms {
		if refused[i] {
			return fmt.Errorf("task memory %s belongs to another client: %w", m.TaskID, store.ErrConflict)
		}
	}
	return nil
}

// GetTaskMemory implements store.Memories.
func (s *Store) GetTaskMemory(ctx context.Context, client, taskID string) (store.TaskMemory, error) {
	var m store.TaskMemory
	var r struct {
		Data string `bson:"data"`
	}
	if err := s.memories.FindOne(ctx, bson.M{"_id": taskID, "client": client}).Decode(&r); err != nil {
		return m, notFound(err, "task memory "+taskID)
	}
	if err := json.Unmarshal([]byte(r.Data), &m); err != nil {
		return m, fmt.Errorf("task memory %s: decode: %w", taskID, err)
	}
	return m, nil
}

// DeleteTaskMemory implements store.Memories.
func (s *Store) DeleteTaskMemory(ctx context.Context, client, taskID string) error {
	_, err := s.memories.DeleteOne(ctx, bson.M{"_id": taskID, "client": client})
	return err
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
	e.At = fromMicros(micros(e.At))
	r := []eventRecord{toEventRecord(newID(), e)}
	if err := s.insertEvents(ctx, r); err != nil {
		return e, err
	}
	e.Seq = r[0].Seq
	return e, nil
}

// LatestEventSeq implements store.Events: the log's stable point (see
// stableEventSeq), which trails the last number taken only while an event
// is on its way.
func (s *Store) LatestEventSeq(ctx context.Context) (int64, error) {
	return s.stableEventSeq(ctx)
}

// ListEvents implements store.Events, up to the log's stable point.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	stable, err := s.stableEventSeq(ctx)
	if err != nil {
		return nil, err
	}
	filter := bson.M{"seq": bson.M{"$gt": q.AfterSeq, "$lte": stable}, "gap": bson.M{"$ne": true}}
	for k, v := range map[string]string{"client": q.Client, "aggregate": q.Aggregate, "aggregateId": q.AggregateID} {
		if v != "" {
			filter[k] = v
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	cur, err := s.events.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var recs []eventRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := make([]store.Event, len(recs))
	for i, r := range recs {
		out[i] = r.event()
	}
	return out, nil
}

// pairKey is the primary key of a per-client entry.
func pairKey(client, key string) string { return client + "\x00" + key }

// ResolveAlias implements store.Aliases.
func (s *Store) ResolveAlias(ctx context.Context, client, alias string) (string, error) {
	var r struct {
		Canonical string `bson:"canonical"`
	}
	if err := s.aliases.FindOne(ctx, bson.M{"_id": pairKey(client, alias)}).Decode(&r); err != nil {
		return "", notFound(err, "alias "+alias)
	}
	return r.Canonical, nil
}

// ResolveAliases implements store.Aliases: one find.
func (s *Store) ResolveAliases(ctx context.Context, client string, aliases []string) (map[string]string, error) {
	out := make(map[string]string)
	if len(aliases) == 0 {
		return out, nil
	}
	keys := make([]string, len(aliases))
	for i, a := range aliases {
		keys[i] = pairKey(client, a)
	}
	cur, err := s.aliases.Find(ctx, bson.M{"_id": bson.M{"$in": keys}}, options.Find().SetProjection(bson.M{"alias": 1, "canonical": 1}))
	if err != nil {
		return nil, fmt.Errorf("resolve aliases: %w", err)
	}
	var recs []struct {
		Alias     string `bson:"alias"`
		Canonical string `bson:"canonical"`
	}
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("resolve aliases: %w", err)
	}
	for _, r := range recs {
		out[r.Alias] = r.Canonical
	}
	return out, nil
}

// RecordAlias implements store.Aliases.
func (s *Store) RecordAlias(ctx context.Context, client, alias, canonical string) error {
	if client == "" || alias == "" || canonical == "" {
		return fmt.Errorf("%w: alias: client, alias and canonical are required", store.ErrInvalid)
	}
	_, err := s.aliases.UpdateOne(ctx, bson.M{"_id": pairKey(client, alias)},
		bson.M{"$set": bson.M{"client": client, "alias": alias, "canonical": canonical, "updatedAt": micros(time.Now())}},
		options.Update().SetUpsert(true))
	return err
}

// GetCursor implements store.Cursors.
func (s *Store) GetCursor(ctx context.Context, key string) (string, error) {
	var r struct {
		Value string `bson:"value"`
	}
	if err := s.cursors.FindOne(ctx, bson.M{"_id": key}).Decode(&r); err != nil {
		return "", notFound(err, "cursor "+key)
	}
	return r.Value, nil
}

// CommitCursor implements store.Cursors.
func (s *Store) CommitCursor(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("%w: cursor key required", store.ErrInvalid)
	}
	_, err := s.cursors.UpdateOne(ctx, bson.M{"_id": key}, bson.M{"$set": bson.M{"value": value, "updatedAt": micros(time.Now())}},
		options.Update().SetUpsert(true))
	return err
}

type clientRecord struct {
	ID         string   `bson:"_id"`
	Name       string   `bson:"name"`
	Namespaces []string `bson:"namespaces,omitempty"`
	CreatedAt  int64    `bson:"createdAt"`
}

func (r clientRecord) client() store.Client {
	c := store.Client{ID: r.ID, Name: r.Name, Namespaces: r.Namespaces, CreatedAt: fromMicros(r.CreatedAt)}
	if len(c.Namespaces) == 0 {
		c.Namespaces = nil
	}
	return c
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
	if len(ns) == 0 {
		ns = nil
	}
	_, err = s.clients.InsertOne(ctx, clientRecord{ID: c.ID, Name: c.Name, Namespaces: ns, CreatedAt: micros(c.CreatedAt)})
	if mgo.IsDuplicateKeyError(err) {
		return false, nil
	}
	return err == nil, err
}

// GetClient implements store.Clients.
func (s *Store) GetClient(ctx context.Context, id string) (store.Client, error) {
	var r clientRecord
	if err := s.clients.FindOne(ctx, bson.M{"_id": id}).Decode(&r); err != nil {
		return store.Client{}, notFound(err, fmt.Sprintf("client %q", id))
	}
	return r.client(), nil
}

// SetClientNamespaces implements store.Clients.
func (s *Store) SetClientNamespaces(ctx context.Context, id string, namespaces []string) (store.Client, error) {
	ns, err := store.NormalizeNamespaces(namespaces)
	if err != nil {
		return store.Client{}, err
	}
	res, err := s.clients.UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$set": bson.M{"namespaces": ns}})
	if err != nil {
		return store.Client{}, fmt.Errorf("set client namespaces: %w", err)
	}
	if res.MatchedCount == 0 {
		return store.Client{}, fmt.Errorf("client %q: %w", id, store.ErrNotFound)
	}
	return s.GetClient(ctx, id)
}

// ListClients implements store.Clients.
func (s *Store) ListClients(ctx context.Context) ([]store.Client, error) {
	cur, err := s.clients.Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	var recs []clientRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	out := make([]store.Client, len(recs))
	for i, r := range recs {
		out[i] = r.client()
	}
	return out, nil
}

type keyRecord struct {
	ID        string `bson:"_id"`
	Client    string `bson:"client"`
	Role      string `bson:"role"`
	Name      string `bson:"name"`
	Hash      string `bson:"hash"`
	CreatedAt int64  `bson:"createdAt"`
	RevokedAt int64  `bson:"revokedAt"`
}

func (r keyRecord) key() store.APIKey {
	return store.APIKey{ID: r.ID, Client: r.Client, Role: r.Role, Name: r.Name, Hash: r.Hash, CreatedAt: fromMicros(r.CreatedAt), RevokedAt: fromMicros(r.RevokedAt)}
}

// CreateAPIKey implements store.Clients.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if err := store.ValidateAPIKey(k); err != nil {
		return err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now()
	}
	_, err := s.keys.InsertOne(ctx, keyRecord{ID: k.ID, Client: k.Client, Role: k.Role, Name: k.Name, Hash: k.Hash, CreatedAt: micros(k.CreatedAt)})
	if mgo.IsDuplicateKeyError(err) {
		return fmt.Errorf("api key %s: %w", k.ID, store.ErrConflict)
	}
	return err
}

// LookupAPIKey implements store.Clients.
func (s *Store) LookupAPIKey(ctx context.Context, hash string) (store.APIKey, error) {
	var r keyRecord
	if err := s.keys.FindOne(ctx, bson.M{"hash": hash, "revokedAt": int64(0)}).Decode(&r); err != nil {
		return store.APIKey{}, notFound(err, "api key")
	}
	return r.key(), nil
}

// ListAPIKeys implements store.Clients.
func (s *Store) ListAPIKeys(ctx context.Context, client string) ([]store.APIKey, error) {
	cur, err := s.keys.Find(ctx, bson.M{"client": client}, options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	var recs []keyRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out := make([]store.APIKey, len(recs))
	for i, r := range recs {
		out[i] = r.key()
	}
	return out, nil
}

// RevokeAPIKey implements store.Clients.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) error {
	res, err := s.keys.UpdateOne(ctx, bson.M{"_id": id, "revokedAt": int64(0)}, bson.M{"$set": bson.M{"revokedAt": micros(time.Now())}})
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 {
		n, err := s.keys.CountDocuments(ctx, bson.M{"_id": id})
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
		}
	}
	return nil
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
	pattern := strings.ToLower(strings.TrimSpace(p.Pattern))
	_, err := s.links.UpdateOne(ctx, bson.M{"client": p.Client, "kind": p.Kind, "pattern": pattern},
		bson.M{"$setOnInsert": bson.M{"createdAt": micros(time.Now())}}, options.Update().SetUpsert(true))
	if mgo.IsDuplicateKeyError(err) {
		return nil // added concurrently
	}
	return err
}

// RemoveLinkPattern implements store.LinkPatterns.
func (s *Store) RemoveLinkPattern(ctx context.Context, client, kind, pattern string) error {
	_, err := s.links.DeleteOne(ctx, bson.M{"client": client, "kind": kind, "pattern": strings.ToLower(strings.TrimSpace(pattern))})
	return err
}

// ListLinkPatterns implements store.LinkPatterns.
func (s *Store) ListLinkPatterns(ctx context.Context, client string) ([]store.LinkPattern, error) {
	cur, err := s.links.Find(ctx, bson.M{"client": client}, options.Find().SetSort(bson.D{{Key: "kind", Value: 1}, {Key: "pattern", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list link patterns: %w", err)
	}
	var recs []struct {
		Client    string `bson:"client"`
		Kind      string `bson:"kind"`
		Pattern   string `bson:"pattern"`
		CreatedAt int64  `bson:"createdAt"`
	}
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("list link patterns: %w", err)
	}
	out := make([]store.LinkPattern, len(recs))
	for i, r := range recs {
		out[i] = store.LinkPattern{Client: r.Client, Kind: r.Kind, Pattern: r.Pattern, CreatedAt: fromMicros(r.CreatedAt)}
	}
	return out, nil
}

// GetModelAnswer implements store.ModelCache.
func (s *Store) GetModelAnswer(ctx context.Context, key string) ([]byte, error) {
	var r struct {
		Answer []byte `bson:"answer"`
	}
	if err := s.answers.FindOne(ctx, bson.M{"_id": key}).Decode(&r); err != nil {
		return nil, notFound(err, "model answer "+key)
	}
	return r.Answer, nil
}

// PutModelAnswer implements store.ModelCache.
func (s *Store) PutModelAnswer(ctx context.Context, key string, answer []byte) error {
	_, err := s.answers.UpdateOne(ctx, bson.M{"_id": key}, bson.M{"$set": bson.M{"answer": answer, "updatedAt": micros(time.Now())}},
		options.Update().SetUpsert(true))
	return err
}

// encoderRecord is a client's encoder in the encoders collection (_id: the
// client).
type encoderRecord struct {
	Name          string `bson:"name"`
	Model         []byte `bson:"model"`
	Items         int    `bson:"items"`
	TrainedAt     int64  `bson:"trainedAt"`
	ReplayPending bool   `bson:"replayPending"`
	Documents     int    `bson:"documents"`
}

// PutEncoder implements store.Encoders.
func (s *Store) PutEncoder(ctx context.Context, e store.Encoder) error {
	if err := store.ValidateEncoder(e); err != nil {
		return err
	}
	_, err := s.encoders.ReplaceOne(ctx, bson.M{"_id": e.Client},
		encoderRecord{Name: e.Name, Model: e.Model, Items: e.Items, TrainedAt: micros(e.TrainedAt), ReplayPending: e.ReplayPending, Documents: e.Documents}, options.Replace().SetUpsert(true))
	return err
}

// GetEncoder implements store.Encoders.
func (s *Store) GetEncoder(ctx context.Context, client string) (store.Encoder, error) {
	var r encoderRecord
	if err := s.encoders.FindOne(ctx, bson.M{"_id": client}).Decode(&r); err != nil {
		return store.Encoder{Client: client}, notFound(err, "encoder of "+client)
	}
	return store.Encoder{Client: client, Name: r.Name, Model: r.Model, Items: r.Items, TrainedAt: fromMicros(r.TrainedAt), ReplayPending: r.ReplayPending, Documents: r.Documents}, nil
}

// EncoderName implements store.Encoders.
func (s *Store) EncoderName(ctx context.Context, client string) (string, error) {
	var r struct {
		Name string `bson:"name"`
	}
	err := s.encoders.FindOne(ctx, bson.M{"_id": client}, options.FindOne().SetProjection(bson.M{"name": 1})).Decode(&r)
	if errors.Is(err, mgo.ErrNoDocuments) {
		return "", nil
	}
	return r.Name, err
}

// ListEncoders implements store.Encoders.
func (s *Store) ListEncoders(ctx context.Context) ([]store.Encoder, error) {
	cur, err := s.encoders.Find(ctx, bson.M{}, options.Find().SetProjection(bson.M{"model": 0}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var out []store.Encoder
	for cur.Next(ctx) {
		var r struct {
			Client        string `bson:"_id"`
			Name          string `bson:"name"`
			Items         int    `bson:"items"`
			TrainedAt     int64  `bson:"trainedAt"`
			ReplayPending bool   `bson:"replayPending"`
			Documents     int    `bson:"documents"`
		}
		if err := cur.Decode(&r); err != nil {
			return nil, err
		}
		out = append(out, store.Encoder{Client: r.Client, Name: r.Name, Items: r.Items, TrainedAt: fromMicros(r.TrainedAt), ReplayPending: r.ReplayPending, Documents: r.Documents})
	}
	return out, cur.Err()
}

// EncoderReplayed implements store.Encoders.
func (s *Store) EncoderReplayed(ctx context.Context, client, name string) error {
	res, err := s.encoders.UpdateOne(ctx, bson.M{"_id": client, "name": name}, bson.M{"$set": bson.M{"replayPending": false}})
	if err != nil || res.MatchedCount > 0 {
		return err
	}
	n, err := s.encoders.CountDocuments(ctx, bson.M{"_id": client})
	if err == nil && n == 0 {
		err = fmt.Errorf("encoder of %s: %w", client, store.ErrNotFound)
	}
	return err
}
