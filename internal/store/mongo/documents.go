package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/gridfs"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/jervis-dev/jervis/internal/store"
)

// inlineLimit is the most raw plus normalized bytes kept inside a document
// record; larger payloads go to GridFS (a MongoDB document holds 16 MiB at
// most, and a 30 MB attachment is a real email).
const inlineLimit = 8 << 20

// docRecord is a document version as stored. Normalized is JSON text, so
// that metadata round-trips exactly as on SQLite. When Large is set, Raw
// and Normalized live in GridFS under the document ID.
type docRecord struct {
	ID          string        `bson:"_id"`
	Rev         int64         `bson:"rev"`
	Client      string        `bson:"client"`
	SourceType  string        `bson:"sourceType"`
	Connection  string        `bson:"connection"`
	ExternalID  string        `bson:"externalId"`
	Version     int           `bson:"version"`
	ContentHash string        `bson:"contentHash"`
	Raw         []byte        `bson:"raw,omitempty"`
	Normalized  string        `bson:"normalized"`
	Large       bool          `bson:"large,omitempty"`
	Degraded    bool          `bson:"degraded,omitempty"` // Normalized has warnings
	ObservedAt  int64         `bson:"observedAt"`
	Priority    int           `bson:"priority"`
	State       string        `bson:"state"`
	LeaseOwner  string        `bson:"leaseOwner"`
	LeaseUntil  int64         `bson:"leaseUntil"`
	Attempts    int           `bson:"attempts"`
	MaxAttempts int           `bson:"maxAttempts"`
	RunAfter    int64         `bson:"runAfter"`
	Error       *errRecord    `bson:"error"`
	UpdatedAt   int64         `bson:"updatedAt"`
	Outbox      []eventRecord `bson:"outbox"`
}

func (r docRecord) document() (store.Document, error) {
	d := store.Document{
		ID: r.ID, Client: r.Client, SourceType: store.SourceType(r.SourceType), Connection: r.Connection,
		ExternalID: r.ExternalID, Version: r.Version, ContentHash: r.ContentHash, Raw: r.Raw,
		ObservedAt: fromMicros(r.ObservedAt), Priority: r.Priority, State: store.DocumentState(r.State), LeaseOwner: r.LeaseOwner,
		LeaseUntil: fromMicros(r.LeaseUntil), Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		RunAfter: fromMicros(r.RunAfter), Error: r.Error.info(), UpdatedAt: fromMicros(r.UpdatedAt),
	}
	if err := store.DecodeNormalized(r.Normalized, &d.Normalized); err != nil {
		return d, fmt.Errorf("document %s: decode normalized: %w", r.ID, err)
	}
	return d, nil
}

func (s *Store) bucket() (*gridfs.Bucket, error) {
	return gridfs.NewBucket(s.db, options.GridFSBucket().SetName("document_payloads"))
}

// Names of a large document's GridFS files.
func rawFile(id string) string        { return id + "/raw" }
func normalizedFile(id string) string { return id + "/normalized" }

// loadLarge reads a large document's payloads from GridFS; raw only when
// withRaw.
func (s *Store) loadLarge(r *docRecord, withRaw bool) error {
	if !r.Large {
		return nil
	}
	b, err := s.bucket()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := b.DownloadToStream(normalizedFile(r.ID), &buf); err != nil {
		return fmt.Errorf("document %s: read normalized from GridFS: %w", r.ID, err)
	}
	r.Normalized = buf.String()
	if withRaw {
		var raw bytes.Buffer
		if _, err := b.DownloadToStream(rawFile(r.ID), &raw); err != nil {
			return fmt.Errorf("document %s: read raw from GridFS: %w", r.ID, err)
		}
		r.Raw = raw.Bytes()
	}
	return nil
}

// storeLarge writes a large document's payloads to GridFS. Files already
// there (a put repeated after a crash) are replaced.
func (s *Store) storeLarge(id string, raw, normalized []byte) error {
	b, err := s.bucket()
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{rawFile(id): raw, normalizedFile(id): normalized} {
		if err := b.Delete(name); err != nil && !errors.Is(err, gridfs.ErrFileNotFound) {
			return fmt.Errorf("document %s: GridFS: %w", id, err)
		}
		if err := b.UploadFromStreamWithID(name, name, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("document %s: GridFS: %w", id, err)
		}
	}
	return nil
}

// PutDocuments implements store.Documents. A page is put in a few
// commands, not seven a document: the versions already stored are found
// by one query, the latest version of each item by another, and the new
// records are inserted unordered in one command, their events flushed
// together. An item named more than once in the call, and a record a
// concurrent writer beat to its version number or content, is put after
// that, one at a time, as PutDocument puts it.
func (s *Store) PutDocuments(ctx context.Context, docs []store.Document) ([]store.PutResult, error) {
	now := time.Now()
	out, normalized := store.PrepareDocuments(docs, now)
	named := map[item]int{}
	for _, r := range out {
		if r.Err == nil {
			named[itemOf(r.Stored)]++
		}
	}
	var batch, alone []int // indexes into docs
	for i, r := range out {
		if r.Err != nil {
			continue
		}
		if named[itemOf(r.Stored)] > 1 {
			alone = append(alone, i)
		} else {
			batch = append(batch, i)
		}
	}
	if len(batch) > 0 {
		ids := make([]string, len(batch))
		for j, i := range batch {
			ids[j] = out[i].Stored.ID
		}
		stored, err := s.findDocuments(ctx, bson.M{"_id": bson.M{"$in": ids}}, true, options.Find())
		if err != nil {
			return nil, fmt.Errorf("put documents: %w", err)
		}
		byID := make(map[string]store.Document, len(stored))
		for _, d := range stored {
			byID[d.ID] = d
		}
		latest, err := s.latestVersions(ctx, out, batch)
		if err != nil {
			return nil, err
		}
		var recs []any
		var inserted []int
		for _, i := range batch {
			d := out[i].Stored
			if got, ok := byID[d.ID]; ok && got.Client == d.Client {
				out[i].Stored = got
				continue
			}
			d.Version = latest[itemOf(d)] + 1
			r, err := s.record(d, normalized[i], now)
			if err != nil {
				return nil, err
			}
			out[i].Stored, out[i].Created = d, true
			recs = append(recs, r)
			inserted = append(inserted, i)
		}
		if len(recs) > 0 {
			_, err := s.docs.InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
			refused, ok := duplicateIndexes(err)
			if !ok {
				return nil, fmt.Errorf("put documents: %w", err)
			}
			var flush []string
			for j, i := range inserted {
				if refused[j] {
					out[i].Stored, out[i].Created = docs[i], false
					alone = append(alone, i)
				} else {
					flush = append(flush, out[i].Stored.ID)
				}
			}
			if err := s.flush(ctx, s.docs, flush); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(alone)
	for _, i := range alone {
		stored, created, err := s.PutDocument(ctx, docs[i])
		if errors.Is(err, store.ErrInvalid) {
			out[i] = store.PutResult{Err: err}
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = store.PutResult{Stored: stored, Created: created}
	}
	return out, nil
}

// item names an external item: its versions share it.
type item struct{ client, source, external string }

func itemOf(d store.Document) item { return item{d.Client, string(d.SourceType), d.ExternalID} }

// latestVersions returns the highest version stored of each item of the
// documents at the indexes batch of out (none: absent), by one query.
func (s *Store) latestVersions(ctx context.Context, out []store.PutResult, batch []int) (map[item]int, error) {
	clients, sources, externals := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, i := range batch {
		k := itemOf(out[i].Stored)
		clients[k.client], sources[k.source], externals[k.external] = true, true, true
	}
	in := func(set map[string]bool) bson.M { return bson.M{"$in": slices.Sorted(maps.Keys(set))} }
	cur, err := s.docs.Find(ctx, bson.M{"client": in(clients), "sourceType": in(sources), "externalId": in(externals)},
		options.Find().SetProjection(bson.M{"client": 1, "sourceType": 1, "externalId": 1, "version": 1}))
	if err != nil {
		return nil, fmt.Errorf("put documents: versions: %w", err)
	}
	var recs []docRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("put documents: versions: %w", err)
	}
	latest := make(map[item]int, len(recs))
	for _, r := range recs {
		k := item{r.Client, r.SourceType, r.ExternalID}
		latest[k] = max(latest[k], r.Version)
	}
	return latest, nil
}

// record is the record of a new document version (prepared, its version
// numbered) with its "stored" event in the outbox; large payloads are
// written to GridFS first.
func (s *Store) record(doc store.Document, normalized []byte, now time.Time) (docRecord, error) {
	r := docRecord{
		ID: doc.ID, Client: doc.Client, SourceType: string(doc.SourceType), Connection: doc.Connection,
		ExternalID: doc.ExternalID, Version: doc.Version, ContentHash: doc.ContentHash, Raw: doc.Raw,
		Normalized: string(normalized), ObservedAt: micros(doc.ObservedAt), Priority: doc.Priority, State: string(doc.State),
		MaxAttempts: doc.MaxAttempts, UpdatedAt: micros(now), Degraded: len(doc.Normalized.Warnings) > 0,
	}
	if len(doc.Raw)+len(normalized) > inlineLimit {
		if err := s.storeLarge(doc.ID, doc.Raw, normalized); err != nil {
			return r, err
		}
		r.Raw, r.Normalized, r.Large = nil, "{}", true
	}
	r.Outbox = []eventRecord{toEventRecord(outboxKey(doc.ID, 0), store.DocumentStoredEvent(doc, now))}
	return r, nil
}

// PutDocument implements store.Documents. Order: (large payloads to
// GridFS,) insert the record with its "stored" event in the outbox, flush.
// The version number is one more than the item's highest; two writers that
// take the same number collide on the unique version index and the loser
// takes the next.
func (s *Store) PutDocument(ctx context.Context, doc store.Document) (store.Document, bool, error) {
	now := time.Now()
	prepared, encoded := store.PrepareDocuments([]store.Document{doc}, now)
	doc, normalized := prepared[0].Stored, encoded[0]
	if err := prepared[0].Err; err != nil {
		return doc, false, err
	}
	for range 20 {
		if existing, err := s.GetDocument(ctx, doc.Client, doc.ID); err == nil {
			return existing, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return doc, false, err
		}
		var last docRecord
		err := s.docs.FindOne(ctx, bson.M{"client": doc.Client, "sourceType": string(doc.SourceType), "externalId": doc.ExternalID},
			options.FindOne().SetSort(bson.D{{Key: "version", Value: -1}}).SetProjection(bson.M{"version": 1})).Decode(&last)
		if err = notFound(err, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			return doc, false, fmt.Errorf("put document: %w", err)
		}
		doc.Version = last.Version + 1
		r, err := s.record(doc, normalized, now)
		if err != nil {
			return doc, false, err
		}
		_, err = s.docs.InsertOne(ctx, r)
		if onlyDuplicates(err) {
			continue // the same content, or the same version number, stored meanwhile
		}
		if err != nil {
			return doc, false, fmt.Errorf("put document: %w", err)
		}
		return doc, true, s.flush(ctx, s.docs, []string{doc.ID})
	}
	return doc, false, fmt.Errorf("put document %s: %w: too many concurrent versions", doc.ID, store.ErrConflict)
}

// GetDocument implements store.Documents.
func (s *Store) GetDocument(ctx context.Context, client, id string) (store.Document, error) {
	var r docRecord
	if err := s.docs.FindOne(ctx, bson.M{"_id": id, "client": client}, options.FindOne().SetProjection(bson.M{"outbox": 0})).Decode(&r); err != nil {
		return store.Document{}, notFound(err, "document "+id)
	}
	if err := s.loadLarge(&r, true); err != nil {
		return store.Document{}, err
	}
	return r.document()
}

// GetDocuments implements store.Documents: one find.
func (s *Store) GetDocuments(ctx context.Context, client string, ids []string) ([]store.Document, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ds, err := s.findDocuments(ctx, bson.M{"_id": bson.M{"$in": ids}, "client": client}, true, options.Find())
	if err != nil {
		return nil, fmt.Errorf("get documents: %w", err)
	}
	return ds, nil
}

func (s *Store) findDocuments(ctx context.Context, filter any, withRaw bool, opts *options.FindOptions) ([]store.Document, error) {
	proj := bson.M{"outbox": 0}
	if !withRaw {
		proj["raw"] = 0
	}
	cur, err := s.docs.Find(ctx, filter, opts.SetProjection(proj))
	if err != nil {
		return nil, err
	}
	var recs []docRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, err
	}
	out := make([]store.Document, len(recs))
	for i := range recs {
		if err := s.loadLarge(&recs[i], withRaw); err != nil {
			return nil, err
		}
		if out[i], err = recs[i].document(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listFilter matches equal fields (empty values match all) and, with
// after, what comes after it in (updatedAt descending, _id) order.
func listFilter(eq bson.M, after *store.Position) bson.M {
	f := bson.M{}
	for k, v := range eq {
		if v != "" {
			f[k] = v
		}
	}
	if after != nil {
		at := micros(after.UpdatedAt)
		f["$or"] = bson.A{
			bson.M{"updatedAt": bson.M{"$lt": at}},
			bson.M{"updatedAt": at, "_id": bson.M{"$gt": after.ID}},
		}
	}
	return f
}

func listOptions(limit int) *options.FindOptions {
	if limit <= 0 {
		limit = 100
	}
	return options.Find().SetSort(bson.D{{Key: "updatedAt", Value: -1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit))
}

// ListDocuments implements store.Documents.
func (s *Store) ListDocuments(ctx context.Context, q store.DocumentQuery) ([]store.Document, error) {
	filter := listFilter(bson.M{"client": q.Client, "state": string(q.State), "sourceType": string(q.SourceType)}, q.After)
	if q.Degraded {
		filter["degraded"] = true
	}
	ds, err := s.findDocuments(ctx, filter, false, listOptions(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	return ds, nil
}

// ListDocumentVersions implements store.Documents.
func (s *Store) ListDocumentVersions(ctx context.Context, client string, source store.SourceType, externalID string) ([]store.Document, error) {
	ds, err := s.findDocuments(ctx, bson.M{"client": client, "sourceType": string(source), "externalId": externalID}, true,
		options.Find().SetSort(bson.D{{Key: "version", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list document versions: %w", err)
	}
	return ds, nil
}

// ClaimDocuments implements store.Documents, as ClaimTasks does.
func (s *Store) ClaimDocuments(ctx context.Context, c store.Claim) ([]store.Document, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	filter := bson.M{"state": string(store.DocNew), "runAfter": bson.M{"$lte": micros(c.Now)}}
	if c.Urgent {
		filter["priority"] = bson.M{"$gte": c.MinPriority()}
	}
	opts := func() *options.FindOptions {
		return options.Find().SetSort(bson.D{{Key: "priority", Value: -1}, {Key: "runAfter", Value: 1}, {Key: "observedAt", Value: 1}}).SetLimit(int64(c.Limit))
	}
	for {
		cands, err := s.findDocRecords(ctx, filter, opts())
		if err != nil {
			return nil, fmt.Errorf("claim documents: %w", err)
		}
		if len(cands) == 0 {
			return nil, nil
		}
		docs := make([]store.Document, 0, len(cands))
		cs := make([]cas, 0, len(cands))
		for _, r := range cands {
			d, err := r.document()
			if err != nil {
				return nil, err
			}
			d.State, d.LeaseOwner, d.LeaseUntil, d.UpdatedAt = store.DocIndexing, c.Owner, c.LeaseUntil, c.Now
			d.Attempts++
			docs = append(docs, d)
			cs = append(cs, cas{r.ID, r.Rev, leaseSet(string(d.State), c.Owner, c.LeaseUntil, d.Attempts, c.Now),
				store.DocumentStateEvent(d, store.DocNew, c.Owner, "claim", c.Now)})
		}
		taken, err := s.takeAll(ctx, s.docs, cs)
		if err != nil {
			return nil, err
		}
		out := make([]store.Document, 0, len(taken))
		for _, i := range taken {
			d, r := docs[i], cands[i]
			if err := s.loadLarge(&r, true); err != nil {
				return out, err
			}
			d.Raw = r.Raw
			if r.Large {
				if err := store.DecodeNormalized(r.Normalized, &d.Normalized); err != nil {
					return out, fmt.Errorf("document %s: decode normalized: %w", r.ID, err)
				}
			}
			out = append(out, d)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

func (s *Store) findDocRecords(ctx context.Context, filter any, opts *options.FindOptions) ([]docRecord, error) {
	cur, err := s.docs.Find(ctx, filter, opts.SetProjection(bson.M{"outbox": 0}))
	if err != nil {
		return nil, err
	}
	var recs []docRecord
	return recs, cur.All(ctx, &recs)
}

// ExtendDocumentLeases implements store.Documents.
func (s *Store) ExtendDocumentLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error) {
	return s.extendLeases(ctx, s.docs, []string{string(store.DocIndexing)}, owner, ids, until)
}

// TransitionDocuments implements store.Documents.
func (s *Store) TransitionDocuments(ctx context.Context, ts []store.DocumentTransition) error {
	now := time.Now()
	read := func(ids []string) (map[string]docRecord, error) {
		recs, err := s.findDocRecords(ctx, bson.M{"_id": bson.M{"$in": ids}}, options.Find().SetProjection(bson.M{"raw": 0}))
		return byID(recs, func(r docRecord) string { return r.ID }), err
	}
	return transitionAll(ctx, s, s.docs, ts, func(t store.DocumentTransition) string { return t.ID }, read, checkDocument(now),
		func(t store.DocumentTransition) error { return s.transitionDocument(ctx, t, now) })
}

func (s *Store) transitionDocument(ctx context.Context, t store.DocumentTransition, now time.Time) error {
	for {
		recs, err := s.findDocRecords(ctx, bson.M{"_id": t.ID}, options.Find().SetLimit(1))
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("document %s: %w", t.ID, store.ErrNotFound)
		}
		c, err := checkDocument(now)(recs[0], t)
		if err != nil {
			return err
		}
		ok, err := s.compareAndSet(ctx, s.docs, c)
		if err != nil || ok {
			return err
		}
	}
}

// checkDocument returns the check of a transition against its document's
// record: the compare-and-set that applies it, or why it does not apply.
func checkDocument(now time.Time) func(docRecord, store.DocumentTransition) (cas, error) {
	return func(r docRecord, t store.DocumentTransition) (cas, error) {
		cur, err := r.document()
		if err != nil {
			return cas{}, err
		}
		if err := store.CheckDocumentTransition(cur, t); err != nil {
			return cas{}, err
		}
		return documentCAS(r.ID, r.Rev, cur, t, t.Owner, now), nil
	}
}

// documentCAS is the compare-and-set that applies t to cur, the document
// of the record id at revision rev.
func documentCAS(id string, rev int64, cur store.Document, t store.DocumentTransition, owner string, now time.Time) cas {
	d := store.ApplyDocumentTransition(cur, t, now)
	return cas{id, rev, bson.M{
		"state": string(d.State), "leaseOwner": "", "leaseUntil": int64(0), "runAfter": micros(d.RunAfter),
		"attempts": d.Attempts, "error": toErrRecord(d.Error), "updatedAt": micros(now), "priority": d.Priority,
	}, store.DocumentStateEvent(d, t.From, owner, t.Reason, now)}
}

// RescueDocuments implements store.Documents.
func (s *Store) RescueDocuments(ctx context.Context, now time.Time) (int, error) {
	recs, err := s.findDocRecords(ctx, bson.M{"state": string(store.DocIndexing), "leaseUntil": bson.M{"$gt": 0, "$lt": micros(now)}}, options.Find())
	if err != nil {
		return 0, fmt.Errorf("rescue documents: %w", err)
	}
	cs := make([]cas, 0, len(recs))
	var unread []error
	for _, r := range recs {
		cur, err := r.document()
		if err != nil {
			unread = append(unread, err) // reported; the others are rescued
			continue
		}
		cs = append(cs, documentCAS(r.ID, r.Rev, cur, store.RescueDocument(cur, now), "", now))
	}
	taken, err := s.takeAll(ctx, s.docs, cs)
	return len(taken), errors.Join(errors.Join(unread...), err, s.flushStale(ctx, s.docs, time.Now()))
}
