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

// Stats implements store.Store with aggregation pipelines, one part at a
// time (model usage needs the task counts).
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.NewStats()
	for _, part := range []func(context.Context, *store.Stats) error{s.statesStats, s.usageStats, s.oldestStats, s.failureStats, s.degradedStats} {
		if err := part(ctx, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// statesStats counts documents and tasks by client, kind and state.
func (s *Store) statesStats(ctx context.Context, st *store.Stats) error {
	var groups []struct {
		ID struct {
			Client string `bson:"client"`
			Kind   string `bson:"kind"`
			State  string `bson:"state"`
		} `bson:"_id"`
		N int64 `bson:"n"`
	}
	group := func(coll *mgo.Collection, kindField string) error {
		groups = nil
		return s.aggregate(ctx, coll, mgo.Pipeline{
			{{Key: "$group", Value: bson.M{"_id": bson.M{"client": "$client", "kind": "$" + kindField, "state": "$state"}, "n": bson.M{"$sum": 1}}}},
		}, &groups)
	}
	if err := group(s.docs, "sourceType"); err != nil {
		return err
	}
	for _, g := range groups {
		st.AddDocuments(g.ID.Client, store.SourceType(g.ID.Kind), store.DocumentState(g.ID.State), g.N)
	}
	if err := group(s.tasks, "kind"); err != nil {
		return err
	}
	for _, g := range groups {
		st.AddTasks(g.ID.Client, store.TaskKind(g.ID.Kind), store.TaskState(g.ID.State), g.N)
	}
	return nil
}

// usageStats adds up the model usage of the tasks of each kind.
func (s *Store) usageStats(ctx context.Context, st *store.Stats) error {
	// One accumulator per pipeline (FerretDB v1 mixes up several $sum
	// accumulators in one $group); the task counts are statesStats's.
	totals := map[string]*store.UsageTotals{}
	for _, f := range []string{"modelCalls", "promptTokens", "outputTokens"} {
		var sums []struct {
			Kind string `bson:"_id"`
			N    int64  `bson:"n"`
		}
		if err := s.aggregate(ctx, s.tasks, mgo.Pipeline{
			{{Key: "$match", Value: bson.M{"usage.modelCalls": bson.M{"$gt": 0}}}},
			{{Key: "$group", Value: bson.M{"_id": "$kind", "n": bson.M{"$sum": "$usage." + f}}}},
		}, &sums); err != nil {
			return err
		}
		for _, x := range sums {
			u := totals[x.Kind]
			if u == nil {
				u = &store.UsageTotals{}
				for _, n := range st.TasksByKind[x.Kind] {
					u.Tasks += n
				}
				totals[x.Kind] = u
			}
			switch f {
			case "modelCalls":
				u.ModelCalls = x.N
			case "promptTokens":
				u.PromptTokens = x.N
			default:
				u.OutputTokens = x.N
			}
		}
	}
	for kind, u := range totals {
		if u.ModelCalls > 0 {
			st.ModelUsage[kind] = *u
		}
	}
	return nil
}

// oldestStats finds the oldest waiting item of each queue.
func (s *Store) oldestStats(ctx context.Context, st *store.Stats) error {
	// One indexed, sorted read per queue (no $min, which FerretDB lacks).
	for _, q := range []struct {
		coll   *mgo.Collection
		prefix string
		states []string
	}{
		{s.docs, "documents.", []string{string(store.DocNew)}},
		{s.tasks, "tasks.", []string{string(store.TaskNew), string(store.TaskRetry), string(store.TaskReadyForGPU)}},
	} {
		for _, state := range q.states {
			var r struct {
				UpdatedAt int64 `bson:"updatedAt"`
			}
			err := q.coll.FindOne(ctx, bson.M{"state": state}, options.FindOne().
				SetSort(bson.D{{Key: "updatedAt", Value: 1}}).SetProjection(bson.M{"updatedAt": 1})).Decode(&r)
			if errors.Is(err, mgo.ErrNoDocuments) {
				continue
			}
			if err != nil {
				return fmt.Errorf("stats %s: %w", q.coll.Name(), err)
			}
			st.OldestWaiting[q.prefix+state] = fromMicros(r.UpdatedAt)
		}
	}
	return nil
}

// failureStats counts quarantined documents and failed tasks by class.
func (s *Store) failureStats(ctx context.Context, st *store.Stats) error {
	var failures []struct {
		Class *string `bson:"_id"`
		N     int64   `bson:"n"`
	}
	for _, q := range []struct {
		coll          *mgo.Collection
		prefix, state string
		errField      string
	}{
		{s.docs, "documents.", string(store.DocQuarantined), "error"},
		{s.tasks, "tasks.", string(store.TaskFailed), "lastError"},
	} {
		failures = nil
		if err := s.aggregate(ctx, q.coll, mgo.Pipeline{
			{{Key: "$match", Value: bson.M{"state": q.state}}},
			{{Key: "$group", Value: bson.M{"_id": "$" + q.errField + ".class", "n": bson.M{"$sum": 1}}}},
		}, &failures); err != nil {
			return err
		}
		for _, f := range failures {
			class := "unknown"
			if f.Class != nil && *f.Class != "" {
				class = *f.Class
			}
			st.Failures[q.prefix+class] += f.N
		}
	}
	return nil
}

// degradedStats counts the documents kept with warnings.
func (s *Store) degradedStats(ctx context.Context, st *store.Stats) error {
	n, err := s.docs.CountDocuments(ctx, bson.M{"degraded": true})
	if err != nil {
		return fmt.Errorf("stats %s: %w", s.docs.Name(), err)
	}
	st.Degraded = n
	return nil
}

func (s *Store) aggregate(ctx context.Context, coll *mgo.Collection, p mgo.Pipeline, out any) error {
	cur, err := coll.Aggregate(ctx, p)
	if err != nil {
		return fmt.Errorf("stats %s: %w", coll.Name(), err)
	}
	if err := cur.All(ctx, out); err != nil {
		return fmt.Errorf("stats %s: %w", coll.Name(), err)
	}
	return nil
}

// Backlog implements store.Store: a count of each of the backlog's states,
// by the collections' indexes by state.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	b := store.Backlog{Documents: store.Counts{}, Tasks: store.Counts{}}
	count := func(coll *mgo.Collection, state string, into store.Counts) error {
		n, err := coll.CountDocuments(ctx, bson.M{"state": state})
		if err != nil {
			return fmt.Errorf("backlog %s: %w", coll.Name(), err)
		}
		if n > 0 {
			into[state] = n
		}
		return nil
	}
	for _, st := range store.BacklogDocumentStates {
		if err := count(s.docs, string(st), b.Documents); err != nil {
			return b, err
		}
	}
	for _, st := range store.BacklogTaskStates {
		if err := count(s.tasks, string(st), b.Tasks); err != nil {
			return b, err
		}
	}
	return b, nil
}
