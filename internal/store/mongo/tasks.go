package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/jervis-dev/jervis/internal/store"
)

type budgetRecord struct {
	MaxIterations int   `bson:"maxIterations"`
	MaxTokens     int   `bson:"maxTokens"`
	MaxDuration   int64 `bson:"maxDuration"`
}

type usageRecord struct {
	Iterations   int   `bson:"iterations"`
	PromptTokens int   `bson:"promptTokens"`
	OutputTokens int   `bson:"outputTokens"`
	ModelCalls   int   `bson:"modelCalls"`
	Duration     int64 `bson:"duration"`
}

// taskRecord is a task as stored. Payload and result are JSON text, kept
// byte for byte.
type taskRecord struct {
	ID            string        `bson:"_id"`
	Rev           int64         `bson:"rev"`
	Kind          string        `bson:"kind"`
	Client        string        `bson:"client"`
	SourceDoc     string        `bson:"sourceDoc"`
	Payload       string        `bson:"payload,omitempty"`
	CorrelationID string        `bson:"correlationId"`
	Priority      int           `bson:"priority"`
	State         string        `bson:"state"`
	Attempts      int           `bson:"attempts"`
	MaxAttempts   int           `bson:"maxAttempts"`
	RunAfter      int64         `bson:"runAfter"`
	LeaseOwner    string        `bson:"leaseOwner"`
	LeaseUntil    int64         `bson:"leaseUntil"`
	LastError     *errRecord    `bson:"lastError"`
	Budget        budgetRecord  `bson:"budget"`
	Usage         usageRecord   `bson:"usage"`
	Result        string        `bson:"result,omitempty"`
	CreatedAt     int64         `bson:"createdAt"`
	UpdatedAt     int64         `bson:"updatedAt"`
	Outbox        []eventRecord `bson:"outbox"`
}

func toTaskRecord(t store.Task) taskRecord {
	return taskRecord{
		ID: t.ID, Kind: string(t.Kind), Client: t.Client, SourceDoc: t.SourceDoc, Payload: string(t.Payload),
		CorrelationID: t.CorrelationID, Priority: t.Priority, State: string(t.State), Attempts: t.Attempts,
		MaxAttempts: t.MaxAttempts, RunAfter: micros(t.RunAfter), LeaseOwner: t.LeaseOwner, LeaseUntil: micros(t.LeaseUntil),
		LastError: toErrRecord(t.LastError),
		Budget:    budgetRecord{MaxIterations: t.Budget.MaxIterations, MaxTokens: t.Budget.MaxTokens, MaxDuration: int64(t.Budget.MaxDuration)},
		Usage:     toUsageRecord(t.Usage),
		Result:    string(t.Result), CreatedAt: micros(t.CreatedAt), UpdatedAt: micros(t.UpdatedAt), Outbox: []eventRecord{},
	}
}

func toUsageRecord(u store.Usage) usageRecord {
	return usageRecord{Iterations: u.Iterations, PromptTokens: u.PromptTokens, OutputTokens: u.OutputTokens, ModelCalls: u.ModelCalls, Duration: int64(u.Duration)}
}

func (r taskRecord) task() store.Task {
	t := store.Task{
		ID: r.ID, Kind: store.TaskKind(r.Kind), Client: r.Client, SourceDoc: r.SourceDoc, CorrelationID: r.CorrelationID,
		Priority: r.Priority, State: store.TaskState(r.State), Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		RunAfter: fromMicros(r.RunAfter), LeaseOwner: r.LeaseOwner, LeaseUntil: fromMicros(r.LeaseUntil), LastError: r.LastError.info(),
		Budget: store.Budget{MaxIterations: r.Budget.MaxIterations, MaxTokens: r.Budget.MaxTokens, MaxDuration: time.Duration(r.Budget.MaxDuration)},
		Usage: store.Usage{Iterations: r.Usage.Iterations, PromptTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.OutputTokens,
			ModelCalls: r.Usage.ModelCalls, Duration: time.Duration(r.Usage.Duration)},
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt),
	}
	if r.Payload != "" {
		t.Payload = json.RawMessage(r.Payload)
	}
	if r.Result != "" {
		t.Result = json.RawMessage(r.Result)
	}
	return t
}

// EnqueueTasks implements store.Tasks. Each new task is inserted with its
// "created" event in its outbox; existing IDs are refused by the primary key
// and left untouched.
func (s *Store) EnqueueTasks(ctx context.Context, tasks ...store.Task) (int, error) {
	now := time.Now()
	recs := make([]any, 0, len(tasks))
	ids := make([]string, 0, len(tasks))
	for i, t := range tasks {
		p, err := store.PrepareTask(t, now)
		if err != nil {
			return 0, fmt.Errorf("task %d: %w", i, err)
		}
		if len(t.Payload) > 0 && !json.Valid(t.Payload) {
			return 0, fmt.Errorf("task %d: %w: payload: not valid JSON", i, store.ErrInvalid)
		}
		r := toTaskRecord(p)
		r.Outbox = []eventRecord{toEventRecord(outboxKey(p.ID, 0), store.Event{At: now, Client: p.Client, Aggregate: store.AggregateTask, AggregateID: p.ID, Type: store.EventTaskCreated, Data: store.TaskCreatedData(p)})}
		recs = append(recs, r)
		ids = append(ids, p.ID)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	_, err := s.tasks.InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
	dups, ok := duplicateIndexes(err)
	if !ok {
		return 0, fmt.Errorf("enqueue tasks: %w", err)
	}
	inserted := make([]string, 0, len(ids))
	for i, id := range ids {
		if !dups[i] {
			inserted = append(inserted, id)
		}
	}
	return len(inserted), s.flush(ctx, s.tasks, inserted)
}

func (s *Store) findTasks(ctx context.Context, filter any, opts ...*options.FindOptions) ([]taskRecord, error) {
	cur, err := s.tasks.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	var out []taskRecord
	return out, cur.All(ctx, &out)
}

// GetTask implements store.Tasks.
func (s *Store) GetTask(ctx context.Context, client, id string) (store.Task, error) {
	var r taskRecord
	if err := s.tasks.FindOne(ctx, bson.M{"_id": id, "client": client}).Decode(&r); err != nil {
		return store.Task{}, notFound(err, "task "+id)
	}
	return r.task(), nil
}

// ListTasks implements store.Tasks.
func (s *Store) ListTasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	filter := listFilter(bson.M{"client": q.Client, "state": string(q.State), "kind": string(q.Kind), "sourceDoc": q.SourceDoc}, q.After)
	recs, err := s.findTasks(ctx, filter, listOptions(q.Limit).SetProjection(bson.M{"outbox": 0}))
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out := make([]store.Task, len(recs))
	for i, r := range recs {
		out[i] = r.task()
	}
	return out, nil
}

// ClaimTasks implements store.Tasks: candidates are read in claim order
// (priority, then RunAfter), and each is taken by a compare-and-set on its
// revision; candidates another claimer took first are skipped, and the read
// is repeated until something is claimed or nothing is claimable.
func (s *Store) ClaimTasks(ctx context.Context, stage store.Stage, c store.Claim) ([]store.Task, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !stage.Valid() {
		return nil, fmt.Errorf("%w: stage %q", store.ErrInvalid, stage)
	}
	states := make([]string, 0, 2)
	for _, st := range stage.ClaimStates() {
		states = append(states, string(st))
	}
	filter := bson.M{"state": bson.M{"$in": states}, "runAfter": bson.M{"$lte": micros(c.Now)}}
	if c.Urgent {
		filter["priority"] = bson.M{"$gte": c.MinPriority()}
	}
	sort := bson.D{{Key: "priority", Value: -1}, {Key: "runAfter", Value: 1}}
	for {
		cands, err := s.findTasks(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(c.Limit)).SetProjection(bson.M{"outbox": 0}))
		if err != nil {
			return nil, fmt.Errorf("claim tasks: %w", err)
		}
		if len(cands) == 0 {
			return nil, nil
		}
		out := make([]store.Task, len(cands))
		cs := make([]cas, len(cands))
		for i, r := range cands {
			t := r.task()
			from := t.State
			t.State, t.LeaseOwner, t.LeaseUntil, t.UpdatedAt = stage.Running(), c.Owner, c.LeaseUntil, c.Now
			t.Attempts++
			out[i] = t
			cs[i] = cas{r.ID, r.Rev, leaseSet(string(t.State), c.Owner, c.LeaseUntil, t.Attempts, c.Now), store.TaskStateEvent(t, from, c.Owner, "claim", c.Now)}
		}
		taken, err := s.takeAll(ctx, s.tasks, cs)
		if err != nil || len(taken) > 0 {
			return pick(out, taken), err
		}
	}
}

// leaseSet is the update of a claim: the running state and the lease.
func leaseSet(state, owner string, until time.Time, attempts int, now time.Time) bson.M {
	return bson.M{"state": state, "leaseOwner": owner, "leaseUntil": micros(until), "attempts": attempts, "updatedAt": micros(now)}
}

// ExtendTaskLeases implements store.Tasks.
func (s *Store) ExtendTaskLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error) {
	return s.extendLeases(ctx, s.tasks, []string{string(store.TaskQualifying), string(store.TaskExecution)}, owner, ids, until)
}

// extendLeases moves the owner's leases on ids (in a running state) to
// until. It bumps the revision, so that a rescue that read the old lease
// loses its compare-and-set.
func (s *Store) extendLeases(ctx context.Context, coll *mgo.Collection, running []string, owner string, ids []string, until time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := coll.UpdateMany(ctx, bson.M{"_id": bson.M{"$in": ids}, "leaseOwner": owner, "state": bson.M{"$in": running}},
		bson.M{"$set": bson.M{"leaseUntil": micros(until)}, "$inc": bson.M{"rev": int64(1)}})
	if err != nil {
		return 0, fmt.Errorf("extend leases: %w", err)
	}
	return int(res.ModifiedCount), nil
}

// TransitionTasks implements store.Tasks.
func (s *Store) TransitionTasks(ctx context.Context, ts []store.TaskTransition) error {
	now := time.Now()
	read := func(ids []string) (map[string]taskRecord, error) {
		recs, err := s.findTasks(ctx, bson.M{"_id": bson.M{"$in": ids}}, options.Find().SetProjection(bson.M{"outbox": 0}))
		return byID(recs, func(r taskRecord) string { return r.ID }), err
	}
	return transitionAll(ctx, s, s.tasks, ts, func(t store.TaskTransition) string { return t.ID }, read, checkTask(now),
		func(t store.TaskTransition) error { return s.transitionTask(ctx, t, now) })
}

// checkTask returns the check of a transition against its task's record:
// the compare-and-set that applies it, or why it does not apply.
func checkTask(now time.Time) func(taskRecord, store.TaskTransition) (cas, error) {
	return func(r taskRecord, t store.TaskTransition) (cas, error) {
		if err := store.CheckTaskTransition(r.task(), t); err != nil {
			return cas{}, err
		}
		return taskCAS(r, t, t.Owner, now), nil
	}
}

// transitionTask checks t against the task as read and applies it by
// compare-and-set, reading again when a lease extension moved the
// revision meanwhile.
func (s *Store) transitionTask(ctx context.Context, t store.TaskTransition, now time.Time) error {
	for {
		var r taskRecord
		if err := s.tasks.FindOne(ctx, bson.M{"_id": t.ID}, options.FindOne().SetProjection(bson.M{"outbox": 0})).Decode(&r); err != nil {
			return notFound(err, "task "+t.ID)
		}
		c, err := checkTask(now)(r, t)
		if err != nil {
			return err
		}
		ok, err := s.compareAndSet(ctx, s.tasks, c)
		if err != nil || ok {
			return err
		}
	}
}

// taskCAS is the compare-and-set that applies t to the record r.
func taskCAS(r taskRecord, t store.TaskTransition, owner string, now time.Time) cas {
	next := store.ApplyTaskTransition(r.task(), t, now)
	return cas{r.ID, r.Rev, bson.M{
		"state": string(next.State), "leaseOwner": "", "leaseUntil": int64(0), "runAfter": micros(next.RunAfter),
		"attempts": next.Attempts, "lastError": toErrRecord(next.LastError), "usage": toUsageRecord(next.Usage),
		"result": string(next.Result), "updatedAt": micros(now), "priority": next.Priority,
	}, store.TaskStateEvent(next, t.From, owner, t.Reason, now)}
}

// RescueTasks implements store.Tasks. It also flushes outboxes that a
// crashed writer left behind.
func (s *Store) RescueTasks(ctx context.Context, stage store.Stage, now time.Time) (int, error) {
	if !stage.Valid() {
		return 0, fmt.Errorf("%w: stage %q", store.ErrInvalid, stage)
	}
	recs, err := s.findTasks(ctx, bson.M{"state": string(stage.Running()), "leaseUntil": bson.M{"$gt": 0, "$lt": micros(now)}},
		options.Find().SetProjection(bson.M{"outbox": 0}))
	if err != nil {
		return 0, fmt.Errorf("rescue tasks: %w", err)
	}
	// Only the lease read here is rescued: if it was extended or the task
	// moved on, the compare-and-set on the revision loses.
	cs := make([]cas, len(recs))
	for i, r := range recs {
		cs[i] = taskCAS(r, store.RescueTask(r.task(), stage, now), "", now)
	}
	taken, err := s.takeAll(ctx, s.tasks, cs)
	return len(taken), errors.Join(err, s.flushStale(ctx, s.tasks, time.Now()))
}
