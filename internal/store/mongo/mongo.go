// Package mongo is the MongoDB backend of internal/store, for deployments
// that outgrow one machine: several `jervis serve --roles=...` processes
// share one database and split the work through leases.
//
// It uses no multi-document transactions, so it runs on a standalone server
// as well as on a replica set. Every step that writes more than one thing is
// ordered and idempotent:
//
//   - A state change of a document or task (claim, transition, rescue) is one
//     compare-and-set update of that record, guarded by its revision
//     counter, which also pushes the event that records the change onto the
//     record's outbox. Only then is the outbox flushed: sequence numbers are
//     taken from the counter, the events are inserted under keys derived
//     from (record, revision) — so inserting one twice is a no-op — and
//     pulled from the outbox. A crash between the update and the flush
//     leaves the event in the outbox; the next change of that record
//     flushes it first, and the lease rescue that workers run periodically
//     flushes outboxes left behind for longer than a minute.
//   - PutDocument and EnqueueTasks insert the record with its "stored" or
//     "created" event already in the outbox, then flush.
//   - SaveTaskMemory writes the memory, then appends its event (a crash in
//     between keeps the memory and loses only that event).
//
// Sequence numbers are taken before events become visible, so with several
// writers an event can appear after one with a higher number. Readers see
// the log only up to its stable point (events.go): no event is ever skipped
// by a reader following the log by number, at the price of a delay while an
// event is on its way (or GapWait, after a writer died holding a number).
package mongo

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/event"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/readpref"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
)

// Options configure Open.
type Options struct {
	// URI is the connection string, e.g. mongodb://mongo:27017/?replicaSet=rs0.
	URI string
	// Database defaults to the URI's path, else "jervis".
	Database string
	// Timeout bounds connecting and every operation, retries included
	// (default 30s).
	Timeout time.Duration
	// Monitor, when set, sees every command sent (benchmarks count them).
	Monitor *event.CommandMonitor
	// GapWait is how long a missing event sequence number holds back the
	// events after it before it counts as abandoned (a writer that died
	// between taking the number and inserting the event); default 10s.
	GapWait time.Duration
}

// Store is the MongoDB pipeline store.
type Store struct {
	client *mgo.Client
	db     *mgo.Database

	docs, tasks, memories, events, counters *mgo.Collection
	aliases, cursors, clients, keys, links  *mgo.Collection
	answers, encoders                       *mgo.Collection
	facts, decisions                        *mgo.Collection

	gapWait time.Duration
	stable  stableSeq // events up to here are all visible
	// bulkLimit, when set, is the most writes one bulk write command
	// carries (ferretBulkLimit on FerretDB).
	bulkLimit int
}

var _ store.Store = (*Store)(nil)

// Collection names.
const (
	collDocuments = "documents"
	collTasks     = "tasks"
)

// Open connects, checks the server answers and creates the indexes.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Database == "" {
		o.Database = databaseOf(o.URI)
	}
	opts := options.Client().ApplyURI(o.URI).
		SetServerSelectionTimeout(o.Timeout).
		SetConnectTimeout(o.Timeout).
		SetTimeout(o.Timeout).
		SetAppName("jervis").
		SetMonitor(o.Monitor)
	client, err := mgo.Connect(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("mongodb %s: %w", Redact(o.URI), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := client.Ping(pingCtx, readpref.Primary()); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongodb %s does not answer: %w", Redact(o.URI), err)
	}
	db := client.Database(o.Database)
	s := &Store{
		client: client, db: db,
		docs: db.Collection(collDocuments), tasks: db.Collection(collTasks),
		memories: db.Collection("task_memory"), events: db.Collection("events"), counters: db.Collection("counters"),
		aliases: db.Collection("aliases"), cursors: db.Collection("cursors"), clients: db.Collection("clients"),
		keys: db.Collection("api_keys"), links: db.Collection("link_patterns"), answers: db.Collection("model_answers"), encoders: db.Collection("encoders"),
		facts: db.Collection("identity_facts"), decisions: db.Collection("identity_decisions"),
		gapWait: cmp.Or(o.GapWait, 10*time.Second),
	}
	if err := s.ensureIndexes(ctx); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongodb %s: create indexes: %w", Redact(o.URI), err)
	}
	server, err := s.ServerVersion(ctx)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongodb %s: %w", Redact(o.URI), err)
	}
	if strings.HasPrefix(server, "FerretDB") {
		s.bulkLimit = ferretBulkLimit
	}
	return s, nil
}

// databaseOf returns the database named in the URI's path, or "jervis".
func databaseOf(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if name := strings.Trim(u.Path, "/"); name != "" {
			return name
		}
	}
	return "jervis"
}

// Redact returns a URI as messages and logs may show it: without its
// userinfo and query-string secrets (redact.URL).
func Redact(uri string) string { return redact.URL(uri) }

func (s *Store) ensureIndexes(ctx context.Context) error {
	idx := func(keys bson.D, unique bool, name string) mgo.IndexModel {
		o := options.Index().SetName(name)
		if unique {
			o.SetUnique(true)
		}
		return mgo.IndexModel{Keys: keys, Options: o}
	}
	all := map[*mgo.Collection][]mgo.IndexModel{
		s.docs: {
			idx(bson.D{{Key: "client", Value: 1}, {Key: "sourceType", Value: 1}, {Key: "externalId", Value: 1}, {Key: "version", Value: 1}}, true, "versions"),
			idx(bson.D{{Key: "state", Value: 1}, {Key: "priority", Value: -1}, {Key: "runAfter", Value: 1}, {Key: "observedAt", Value: 1}}, false, "claimByPriority"),
			idx(bson.D{{Key: "state", Value: 1}, {Key: "leaseUntil", Value: 1}}, false, "rescue"),
			idx(bson.D{{Key: "client", Value: 1}, {Key: "updatedAt", Value: -1}, {Key: "_id", Value: 1}}, false, "listing"),
			idx(bson.D{{Key: "state", Value: 1}, {Key: "updatedAt", Value: 1}}, false, "waiting"),
			idx(bson.D{{Key: "outbox.at", Value: 1}}, false, "outbox"),
			idx(bson.D{{Key: "degraded", Value: 1}, {Key: "client", Value: 1}, {Key: "updatedAt", Value: -1}}, false, "degraded"),
		},
		s.tasks: {
			idx(bson.D{{Key: "state", Value: 1}, {Key: "priority", Value: -1}, {Key: "runAfter", Value: 1}}, false, "claim"),
			idx(bson.D{{Key: "state", Value: 1}, {Key: "leaseUntil", Value: 1}}, false, "rescue"),
			idx(bson.D{{Key: "client", Value: 1}, {Key: "updatedAt", Value: -1}, {Key: "_id", Value: 1}}, false, "listing"),
			idx(bson.D{{Key: "state", Value: 1}, {Key: "updatedAt", Value: 1}}, false, "waiting"),
			idx(bson.D{{Key: "sourceDoc", Value: 1}}, false, "sourceDoc"),
			idx(bson.D{{Key: "outbox.at", Value: 1}}, false, "outbox"),
		},
		s.events: {
			idx(bson.D{{Key: "seq", Value: 1}}, true, "seq"),
			idx(bson.D{{Key: "client", Value: 1}, {Key: "seq", Value: 1}}, false, "client"),
			idx(bson.D{{Key: "aggregateId", Value: 1}, {Key: "seq", Value: 1}}, false, "aggregate"),
		},
		s.memories: {idx(bson.D{{Key: "client", Value: 1}}, false, "client")},
		s.keys: {
			idx(bson.D{{Key: "hash", Value: 1}}, true, "hash"),
			idx(bson.D{{Key: "client", Value: 1}, {Key: "createdAt", Value: 1}}, false, "client"),
		},
		// "order" (EachIdentityFact's sort) also serves a source's facts
		// (retired: its "source" index is dropped).
		s.facts: {idx(append(bson.D{{Key: "client", Value: 1}}, factOrder...), false, "order"),
			idx(bson.D{{Key: "client", Value: 1}, {Key: "ref", Value: 1}}, false, "ref")},
		s.decisions: {idx(bson.D{{Key: "client", Value: 1}, {Key: "at", Value: 1}}, false, "client")},
		s.aliases:   {idx(bson.D{{Key: "client", Value: 1}, {Key: "alias", Value: 1}}, false, "client")},
		s.links:     {idx(bson.D{{Key: "client", Value: 1}, {Key: "kind", Value: 1}, {Key: "pattern", Value: 1}}, true, "pattern")},
	}
	// Indexes earlier versions made that later ones made redundant,
	// dropped where they are: identity facts' "source" (client, source) is
	// a prefix of "order", which serves the same reads.
	retired := map[*mgo.Collection][]string{s.facts: {"source"}}
	for c, models := range all {
		// Only the missing ones: creating an existing index again is a
		// no-op on MongoDB but can crash FerretDB v1.
		cur, err := c.Indexes().List(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		var have []struct {
			Name string `bson:"name"`
		}
		if err := cur.All(ctx, &have); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		for _, h := range have {
			if slices.Contains(retired[c], h.Name) {
				// Another process opening the store at once may have dropped
				// it first (IndexNotFound, code 27).
				var ce mgo.CommandError
				if _, err := c.Indexes().DropOne(ctx, h.Name); err != nil && !(errors.As(err, &ce) && ce.Code == 27) {
					return fmt.Errorf("%s: drop the retired index %s: %w", c.Name(), h.Name, err)
				}
			}
		}
		missing := models[:0]
		for _, m := range models {
			if !slices.ContainsFunc(have, func(h struct {
				Name string `bson:"name"`
			}) bool {
				return h.Name == *m.Options.Name
			}) {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if _, err := c.Indexes().CreateMany(ctx, missing); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
	}
	return nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	return s.client.Ping(ctx, readpref.Primary())
}

// Close implements store.Store.
func (s *Store) Close() error {
	return s.client.Disconnect(context.Background())
}

// Drop deletes the whole database (tests).
func (s *Store) Drop(ctx context.Context) error { return s.db.Drop(ctx) }

// micros is a time as stored: microseconds since the epoch, 0 for none.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// errRecord is an ErrorInfo as stored (a sub-document, so that statistics
// can group by class).
type errRecord struct {
	Class       string `bson:"class"`
	Message     string `bson:"message"`
	Recoverable bool   `bson:"recoverable"`
}

func toErrRecord(e *store.ErrorInfo) *errRecord {
	if e == nil {
		return nil
	}
	return &errRecord{Class: e.Class, Message: e.Message, Recoverable: e.Recoverable}
}

func (e *errRecord) info() *store.ErrorInfo {
	if e == nil {
		return nil
	}
	return &store.ErrorInfo{Class: e.Class, Message: e.Message, Recoverable: e.Recoverable}
}

// eventRecord is an event as stored, in the events collection and in a
// record's outbox. ID makes inserting the same event twice a no-op.
type eventRecord struct {
	ID          string `bson:"_id"`
	Seq         int64  `bson:"seq,omitempty"`
	At          int64  `bson:"at"`
	Client      string `bson:"client"`
	Aggregate   string `bson:"aggregate"`
	AggregateID string `bson:"aggregateId"`
	Type        string `bson:"type"`
	Data        string `bson:"data,omitempty"`
	Inserted    int64  `bson:"ins,omitempty"` // when it was inserted (µs)
	Gap         bool   `bson:"gap,omitempty"` // a placeholder for an unused number
}

func toEventRecord(id string, e store.Event) eventRecord {
	return eventRecord{ID: id, At: micros(e.At), Client: e.Client, Aggregate: e.Aggregate, AggregateID: e.AggregateID, Type: e.Type, Data: string(e.Data)}
}

func (r eventRecord) event() store.Event {
	e := store.Event{Seq: r.Seq, At: fromMicros(r.At), Client: r.Client, Aggregate: r.Aggregate, AggregateID: r.AggregateID, Type: r.Type}
	if r.Data != "" {
		e.Data = json.RawMessage(r.Data)
	}
	return e
}

// outboxKey names the event of a record's revision.
func outboxKey(id string, rev int64) string { return fmt.Sprintf("%s#%d", id, rev) }

// nextSeqs reserves n sequence numbers and returns the first.
func (s *Store) nextSeqs(ctx context.Context, n int) (int64, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := s.counters.FindOneAndUpdate(ctx, bson.M{"_id": "events"}, bson.M{"$inc": bson.M{"seq": int64(n)}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
	if err != nil {
		return 0, fmt.Errorf("event sequence: %w", err)
	}
	return c.Seq - int64(n) + 1, nil
}

// insertEvents numbers the events and inserts them; events already stored
// (a flush repeated after a crash or by a concurrent writer) are skipped.
// An event refused because another holds its number (a server whose $inc
// is a read, then a write, can hand two writers the same numbers: FerretDB
// v1) is numbered again.
func (s *Store) insertEvents(ctx context.Context, evs []eventRecord) error {
	for range 20 {
		if len(evs) == 0 {
			return nil
		}
		first, err := s.nextSeqs(ctx, len(evs))
		if err != nil {
			return err
		}
		docs := make([]any, len(evs))
		now := time.Now().UnixMicro()
		for i := range evs {
			evs[i].Seq, evs[i].Inserted = first+int64(i), now
			docs[i] = evs[i]
		}
		_, err = s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		dups, ok := duplicateIndexes(err)
		if !ok {
			return fmt.Errorf("insert events: %w", err)
		}
		if len(dups) == 0 {
			return nil
		}
		refused := make([]string, 0, len(dups))
		for i := range dups {
			refused = append(refused, evs[i].ID)
		}
		stored, err := s.eventsStored(ctx, refused)
		if err != nil {
			return err
		}
		// A refused event leaves its new number unused: a placeholder
		// fills it (unless another event holds it), so that readers need
		// not wait for it.
		var fill []any
		var again []eventRecord
		for _, i := range slices.Sorted(maps.Keys(dups)) {
			fill = append(fill, eventRecord{ID: fmt.Sprintf("gap:%d", evs[i].Seq), Seq: evs[i].Seq, Inserted: now, Gap: true})
			if !stored[evs[i].ID] {
				again = append(again, evs[i])
			}
		}
		if _, err := s.events.InsertMany(ctx, fill, options.InsertMany().SetOrdered(false)); err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("insert events: %w", err)
		}
		evs = again
	}
	return fmt.Errorf("insert events: %w: their numbers taken 20 times over", store.ErrConflict)
}

// eventsStored returns which of the event IDs are in the log.
func (s *Store) eventsStored(ctx context.Context, ids []string) (map[string]bool, error) {
	out, err := idsWhere(ctx, s.events, bson.M{"_id": bson.M{"$in": ids}})
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	return out, nil
}

// idsWhere returns the IDs of coll's records that match filter.
func idsWhere(ctx context.Context, coll *mgo.Collection, filter bson.M) (map[string]bool, error) {
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return nil, err
	}
	var recs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &recs); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(recs))
	for _, r := range recs {
		out[r.ID] = true
	}
	return out, nil
}

// flush moves the outbox events of the records ids of coll into the event
// log, in the order they were pushed.
func (s *Store) flush(ctx context.Context, coll *mgo.Collection, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if len(ids) == 1 {
		return s.flushWhere(ctx, coll, bson.M{"_id": ids[0]}) // an equality servers answer from the primary key alone
	}
	return s.flushWhere(ctx, coll, bson.M{"_id": bson.M{"$in": ids}})
}

func (s *Store) flushWhere(ctx context.Context, coll *mgo.Collection, filter bson.M) error {
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.M{"outbox": 1}))
	if err != nil {
		return fmt.Errorf("%s outbox: %w", coll.Name(), err)
	}
	var recs []struct {
		ID     string        `bson:"_id"`
		Outbox []eventRecord `bson:"outbox"`
	}
	if err := cur.All(ctx, &recs); err != nil {
		return fmt.Errorf("%s outbox: %w", coll.Name(), err)
	}
	var evs []eventRecord
	for _, r := range recs {
		evs = append(evs, r.Outbox...)
	}
	if len(evs) == 0 {
		return nil
	}
	if err := s.insertEvents(ctx, evs); err != nil {
		return err
	}
	// Pulled by exact value ($pullAll): an entry pushed meanwhile stays.
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	done := make(bson.A, 0, len(evs))
	for _, r := range recs {
		for _, e := range r.Outbox {
			done = append(done, e)
		}
	}
	if _, err := coll.UpdateMany(ctx, bson.M{"_id": bson.M{"$in": ids}}, bson.M{"$pullAll": bson.M{"outbox": done}}); err != nil {
		return fmt.Errorf("%s outbox: %w", coll.Name(), err)
	}
	return nil
}

// pendingOutbox matches records whose outbox holds an event.
var pendingOutbox = bson.M{"outbox.at": bson.M{"$gt": 0}}

// flushStale flushes outboxes left behind (by a writer that crashed between
// its update and its flush) for longer than a minute.
func (s *Store) flushStale(ctx context.Context, coll *mgo.Collection, now time.Time) error {
	return s.flushWhere(ctx, coll, bson.M{"outbox.at": bson.M{"$gt": 0, "$lt": micros(now.Add(-time.Minute))}})
}

// onlyDuplicates reports whether every error of a write is a duplicate key.
func onlyDuplicates(err error) bool {
	var bw mgo.BulkWriteException
	if errors.As(err, &bw) {
		if bw.WriteConcernError != nil || len(bw.WriteErrors) == 0 {
			return false
		}
		for _, we := range bw.WriteErrors {
			if we.Code != 11000 {
				return false
			}
		}
		return true
	}
	return mgo.IsDuplicateKeyError(err)
}

// duplicateIndexes returns the positions of the inserts a bulk write refused
// as duplicates, or ok=false when it failed otherwise.
func duplicateIndexes(err error) (map[int]bool, bool) {
	if err == nil {
		return nil, true
	}
	var bw mgo.BulkWriteException
	if !errors.As(err, &bw) || !onlyDuplicates(err) {
		return nil, false
	}
	out := make(map[int]bool, len(bw.WriteErrors))
	for _, we := range bw.WriteErrors {
		out[we.Index] = true
	}
	return out, true
}

// newID returns a random identifier for events appended directly.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "ev:" + hex.EncodeToString(b[:])
}

// notFound turns the driver's no-documents error into store.ErrNotFound.
func notFound(err error, what string) error {
	if errors.Is(err, mgo.ErrNoDocuments) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// ServerVersion names the server: "MongoDB 7.0.14", or "FerretDB v1.24.0"
// for FerretDB (which speaks the same protocol but lacks atomic conditional
// updates; see storetest.Caps).
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	var info struct {
		Version         string `bson:"version"`
		FerretDBVersion string `bson:"ferretdbVersion"`
	}
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return "", fmt.Errorf("buildInfo: %w", err)
	}
	if info.FerretDBVersion != "" {
		return "FerretDB " + info.FerretDBVersion, nil
	}
	return "MongoDB " + info.Version, nil
}

// ErrNoChangeStreams means the server has none: a standalone MongoDB (change
// streams need a replica set) or FerretDB.
var ErrNoChangeStreams = errors.New("the server has no change streams")

// WatchInserts calls onDocument after each document version inserted and
// onTask after each task inserted — by any process — from a change stream,
// until ctx ends (then it returns nil). A stream that breaks (a timeout, a
// failover) is reopened where it left off. Where the server has no change
// streams it returns an error wrapping ErrNoChangeStreams at once; idle
// workers then find new work by polling.
func (s *Store) WatchInserts(ctx context.Context, onDocument, onTask func()) error {
	pipeline := mgo.Pipeline{
		{{Key: "$match", Value: bson.M{"operationType": "insert", "ns.coll": bson.M{"$in": bson.A{collDocuments, collTasks}}}}},
		{{Key: "$project", Value: bson.M{"ns": 1}}},
	}
	var resume bson.Raw
	for attempt := 0; ; attempt++ {
		opts := options.ChangeStream()
		if resume != nil {
			opts.SetResumeAfter(resume)
		}
		cs, err := s.db.Watch(ctx, pipeline, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if attempt == 0 {
				return fmt.Errorf("%w: %v", ErrNoChangeStreams, err)
			}
			select { // the server may be failing over: try again
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		for cs.Next(ctx) {
			var ev struct {
				NS struct {
					Coll string `bson:"coll"`
				} `bson:"ns"`
			}
			if cs.Decode(&ev) == nil {
				switch ev.NS.Coll {
				case collDocuments:
					onDocument()
				case collTasks:
					onTask()
				}
			}
		}
		resume = cs.ResumeToken()
		_ = cs.Close(context.Background())
		if ctx.Err() != nil {
			return nil
		}
	}
}
