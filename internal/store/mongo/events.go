package mongo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Without transactions an event's number is taken (from the counter) before
// the event is inserted, so with several writers an event can become
// visible after one with a higher number. A reader that follows the log by
// number (the API's event stream) would skip it. So readers see the log only
// up to its stable point: the highest number below which every number is
// visible — an event, or a placeholder for a number a repeated flush left
// unused. A number still missing after GapWait belonged to a writer that
// died between taking it and inserting; it no longer holds the log back.

// stableSeq is the stable point this process has established; it only
// grows, and the log below it never changes.
type stableSeq struct {
	mu     sync.Mutex
	seq    int64
	loaded bool // seq starts from the point stored by any process
}

// stableKey names the counters document where processes share the stable
// point, so that a new process does not read the whole log to find it.
const stableKey = "events_stable"

// stableEventSeq advances and returns the stable point.
func (s *Store) stableEventSeq(ctx context.Context) (int64, error) {
	s.stable.mu.Lock()
	defer s.stable.mu.Unlock()
	if !s.stable.loaded {
		var c struct {
			Seq int64 `bson:"seq"`
		}
		err := s.counters.FindOne(ctx, bson.M{"_id": stableKey}).Decode(&c)
		if err != nil && !errors.Is(err, mgo.ErrNoDocuments) {
			return 0, fmt.Errorf("event log: %w", err)
		}
		s.stable.seq, s.stable.loaded = max(s.stable.seq, c.Seq), true
	}
	from := s.stable.seq
	defer func() {
		if s.stable.seq > from { // share it (best effort: it only saves reading)
			_, _ = s.counters.UpdateOne(ctx, bson.M{"_id": stableKey}, bson.M{"$max": bson.M{"seq": s.stable.seq}}, options.Update().SetUpsert(true))
		}
	}()
	now := time.Now()
	for {
		cur, err := s.events.Find(ctx, bson.M{"seq": bson.M{"$gt": s.stable.seq}}, options.Find().
			SetSort(bson.D{{Key: "seq", Value: 1}}).SetLimit(1000).SetProjection(bson.M{"seq": 1, "ins": 1}))
		if err != nil {
			return 0, fmt.Errorf("event log: %w", err)
		}
		var recs []struct {
			Seq      int64 `bson:"seq"`
			Inserted int64 `bson:"ins"`
		}
		if err := cur.All(ctx, &recs); err != nil {
			return 0, fmt.Errorf("event log: %w", err)
		}
		for _, r := range recs {
			// r.Seq > stable+1: numbers are missing below it. They were
			// taken before r's, so once r is older than GapWait they are
			// abandoned.
			if r.Seq != s.stable.seq+1 && now.Sub(time.UnixMicro(r.Inserted)) < s.gapWait {
				return s.stable.seq, nil
			}
			s.stable.seq = r.Seq
		}
		if len(recs) < 1000 {
			return s.stable.seq, nil
		}
	}
}
