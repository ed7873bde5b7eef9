package mongo

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
)

// TestOutboxRepair: a writer that dies between its state change and the
// flush of its event loses nothing: the next change of the same task
// flushes the event first, and the rescue flushes events left alone.
func TestOutboxRepair(t *testing.T) {
	uri := integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
	ctx := t.Context()
	s, err := Open(ctx, Options{URI: uri, Database: "jervis_test_outbox"})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Drop(ctx)
	t.Cleanup(func() { _ = s.Drop(context.Background()); _ = s.Close() })
	if _, err := s.EnqueueTasks(ctx, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: "a"}, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: "b"}); err != nil {
		t.Fatal(err)
	}
	// "Crash": the claim's update lands, its flush never runs.
	crash := func(id string, at time.Time) {
		var r taskRecord
		if err := s.tasks.FindOne(ctx, bson.M{"_id": id}).Decode(&r); err != nil {
			t.Fatal(err)
		}
		cur := r.task()
		cur.State, cur.LeaseOwner, cur.LeaseUntil = store.TaskQualifying, "dead", at.Add(time.Second)
		cur.Attempts++
		ok, err := s.compareAndSet(ctx, s.tasks, id, r.Rev, bson.M{"state": string(cur.State), "leaseOwner": "dead",
			"leaseUntil": micros(cur.LeaseUntil), "attempts": cur.Attempts}, store.TaskStateEvent(cur, store.TaskNew, "dead", "claim", at))
		if !ok || err != nil {
			t.Fatalf("cas: %v %v", ok, err)
		}
	}
	a, b := store.TaskID("a", store.KindData, ""), store.TaskID("b", store.KindData, "")
	crash(a, time.Now())
	crash(b, time.Now().Add(-2*time.Minute))
	states := func(id string) []string {
		evs, err := s.ListEvents(ctx, store.EventQuery{AggregateID: id})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	if got := states(a); len(got) != 1 {
		t.Fatalf("before repair a has %v", got)
	}
	// The next change of a (an admin failing it) flushes the claim first.
	if err := s.TransitionTasks(ctx, []store.TaskTransition{{ID: a, From: store.TaskQualifying, To: store.TaskFailed, Reason: "admin"}}); err != nil {
		t.Fatal(err)
	}
	if got := states(a); len(got) != 3 || got[1] != store.EventTaskState || got[2] != store.EventTaskState {
		t.Fatalf("a's events after its next change: %v", got)
	}
	// b is left alone: the rescue (its lease ran out) flushes the old claim
	// event, then records the rescue.
	if n, err := s.RescueTasks(ctx, store.StageQualify, time.Now()); err != nil || n != 1 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	evs, err := s.ListEvents(ctx, store.EventQuery{AggregateID: b})
	if err != nil || len(evs) != 3 {
		t.Fatalf("b's events after rescue: %+v %v", evs, err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("b's events out of order: %+v", evs)
		}
	}
	var all []taskRecord
	cur, _ := s.tasks.Find(ctx, bson.M{})
	_ = cur.All(ctx, &all)
	for _, r := range all {
		if len(r.Outbox) != 0 {
			t.Fatalf("outbox left: %+v", r.Outbox)
		}
	}
	if n, err := s.tasks.CountDocuments(ctx, pendingOutbox); err != nil || n != 0 {
		t.Fatalf("pending outbox filter matches %d (%v)", n, err)
	}
}
