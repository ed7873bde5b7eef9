package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/jervis-dev/jervis/internal/store"
)

// cas is a compare-and-set of one record: applied only if the record is
// still at revision rev, it writes set, bumps the revision and pushes ev
// onto the record's outbox, keyed by the new revision.
type cas struct {
	id  string
	rev int64
	set bson.M
	ev  store.Event
}

// casToken is the field each applied compare-and-set writes its bulk
// write's token to, so that a bulk write only some of whose records
// matched can tell which.
const casToken = "casToken"

// compareAndSetAll applies cs (each to a record of its own) in one
// unordered bulk write and reports which were applied. The matched count
// says it when all or none matched — the usual cases; otherwise the
// records are read back by the token the applied ones wrote. A server
// without atomic conditional updates (FerretDB v1) may report a record as
// matched that another writer changed at the same time; so did one update
// at a time.
func (s *Store) compareAndSetAll(ctx context.Context, coll *mgo.Collection, cs []cas) ([]bool, error) {
	applied := make([]bool, len(cs))
	if len(cs) == 0 {
		return applied, nil
	}
	token := newID()
	models := make([]mgo.WriteModel, len(cs))
	for i, c := range cs {
		set := make(bson.M, len(c.set)+2)
		for k, v := range c.set {
			set[k] = v
		}
		set["rev"], set[casToken] = c.rev+1, token
		models[i] = mgo.NewUpdateOneModel().SetFilter(bson.M{"_id": c.id, "rev": c.rev}).SetUpdate(bson.M{
			"$set":  set,
			"$push": bson.M{"outbox": toEventRecord(outboxKey(c.id, c.rev+1), c.ev)},
		})
	}
	res, err := s.bulkWrite(ctx, coll, models)
	if err != nil {
		return nil, err
	}
	switch res.MatchedCount {
	case int64(len(cs)):
		for i := range applied {
			applied[i] = true
		}
		return applied, nil
	case 0:
		return applied, nil
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	got, err := idsWhere(ctx, coll, bson.M{"_id": bson.M{"$in": ids}, casToken: token})
	if err != nil {
		return nil, fmt.Errorf("read back a compare-and-set: %w", err)
	}
	for i, c := range cs {
		applied[i] = got[c.id]
	}
	return applied, nil
}

// compareAndSet applies one compare-and-set and reports whether the record
// was still at its revision.
func (s *Store) compareAndSet(ctx context.Context, coll *mgo.Collection, c cas) (bool, error) {
	applied, err := s.compareAndSetAll(ctx, coll, []cas{c})
	return err == nil && applied[0], err
}

// takeAll applies cs (each taking a record: a claim, a rescue) and flushes
// the events of those applied; it returns their indexes in cs. Records
// another writer changed meanwhile are skipped.
func (s *Store) takeAll(ctx context.Context, coll *mgo.Collection, cs []cas) ([]int, error) {
	applied, err := s.compareAndSetAll(ctx, coll, cs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", coll.Name(), err)
	}
	var taken []int
	var ids []string
	for i, ok := range applied {
		if ok {
			taken = append(taken, i)
			ids = append(ids, cs[i].id)
		}
	}
	return taken, s.flush(ctx, coll, ids)
}

// transitionAll applies the transitions ts to coll's records in a few
// commands: the records are read at once (read, by ID), each transition is
// checked against its record (check returns the compare-and-set that
// applies it, or why it does not apply), and those that apply are applied
// in one bulk write. A transition whose record moved meanwhile (a lease
// extended), or whose record an earlier transition of ts names too, is
// applied afterwards by one, which reads its record again. Then the events
// of those applied are flushed. Transitions that are illegal, stale or of
// missing records are skipped and reported together, as store.Documents
// and store.Tasks say.
func transitionAll[R, T any](ctx context.Context, s *Store, coll *mgo.Collection, ts []T, idOf func(T) string,
	read func(ids []string) (map[string]R, error), check func(R, T) (cas, error), one func(T) error) error {
	var first, later []T
	var ids []string
	named := make(map[string]bool, len(ts))
	for _, t := range ts {
		if id := idOf(t); !named[id] {
			named[id] = true
			first, ids = append(first, t), append(ids, id)
		} else {
			later = append(later, t)
		}
	}
	recs, err := read(ids)
	if err != nil {
		return err
	}
	var skipped []error
	var cs []cas
	var checked []T
	for _, t := range first {
		r, ok := recs[idOf(t)]
		if !ok {
			skipped = append(skipped, fmt.Errorf("%s %s: %w", coll.Name(), idOf(t), store.ErrNotFound))
			continue
		}
		c, err := check(r, t)
		switch {
		case err == nil:
			cs, checked = append(cs, c), append(checked, t)
		case skippable(err):
			skipped = append(skipped, err)
		default:
			return err
		}
	}
	applied, err := s.compareAndSetAll(ctx, coll, cs)
	if err != nil {
		return fmt.Errorf("%s: %w", coll.Name(), err)
	}
	var done []string
	var again []T
	for i, ok := range applied {
		if ok {
			done = append(done, cs[i].id)
		} else {
			again = append(again, checked[i])
		}
	}
	for _, t := range append(again, later...) {
		switch err := one(t); {
		case err == nil:
			done = append(done, idOf(t))
		case skippable(err):
			skipped = append(skipped, err)
		default:
			return errors.Join(err, s.flush(ctx, coll, done))
		}
	}
	if err := s.flush(ctx, coll, done); err != nil {
		return err
	}
	return errors.Join(skipped...)
}

// skippable reports the errors of a transition that is skipped: illegal,
// stale, or of a record that is not there.
func skippable(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrIllegalTransition) || errors.Is(err, store.ErrNotFound)
}

// pick returns the elements of xs at the indexes at, in their order.
func pick[T any](xs []T, at []int) []T {
	out := make([]T, len(at))
	for i, j := range at {
		out[i] = xs[j]
	}
	return out
}

// byID maps records by their ID.
func byID[R any](recs []R, id func(R) string) map[string]R {
	m := make(map[string]R, len(recs))
	for _, r := range recs {
		m[id(r)] = r
	}
	return m
}

// ferretBulkLimit is the most writes a bulk write sends in one command to
// FerretDB. FerretDB v1 (internal/handler/msg_update.go) keeps each update
// statement's query open, holding a connection of its SQLite pool (100),
// until the whole command ends; a command of many updates that match, or
// a few such commands at once, can take the whole pool and wait for
// itself for ever. MongoDB takes a batch in one command.
const ferretBulkLimit = 8

// bulkWrite sends models to coll unordered, in one command on MongoDB and
// in commands of at most Store.bulkLimit writes where that is set
// (FerretDB), and sums their results; a write error's index is its
// model's in models.
func (s *Store) bulkWrite(ctx context.Context, coll *mgo.Collection, models []mgo.WriteModel) (*mgo.BulkWriteResult, error) {
	size := len(models)
	if s.bulkLimit > 0 {
		size = s.bulkLimit
	}
	if len(models) <= size {
		res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if res == nil {
			res = &mgo.BulkWriteResult{}
		}
		return res, err
	}
	sum := &mgo.BulkWriteResult{UpsertedIDs: map[int64]any{}}
	var failed mgo.BulkWriteException
	for at := 0; at < len(models); at += size {
		part := models[at:min(len(models), at+size)]
		res, err := coll.BulkWrite(ctx, part, options.BulkWrite().SetOrdered(false))
		var bw mgo.BulkWriteException
		switch {
		case err == nil:
		case errors.As(err, &bw) && bw.WriteConcernError == nil:
			for _, we := range bw.WriteErrors {
				we.Index += at
				failed.WriteErrors = append(failed.WriteErrors, we)
			}
		default:
			return sum, err
		}
		if res != nil {
			sum.InsertedCount += res.InsertedCount
			sum.MatchedCount += res.MatchedCount
			sum.ModifiedCount += res.ModifiedCount
			sum.DeletedCount += res.DeletedCount
			sum.UpsertedCount += res.UpsertedCount
			for i, id := range res.UpsertedIDs {
				sum.UpsertedIDs[i+int64(at)] = id
			}
		}
	}
	if len(failed.WriteErrors) > 0 {
		return sum, failed
	}
	return sum, nil
}
