package mongo

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/jervis-dev/jervis/internal/store"
)

// TestOutboxRepair: a writer that dies between its state change and the
// flush of its event loses nothing: the next change of the same task
// flushes the event first, and the rescue flushes events left alone.
func TestOutboxRepair(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_outbox"})
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
		ok, err := s.compareAndSet(ctx, s.tasks, cas{id, r.Rev, bson.M{"state": string(cur.State), "leaseOwner": "dead",
			"leaseUntil": micros(cur.LeaseUntil), "attempts": cur.Attempts}, store.TaskStateEvent(cur, store.TaskNew, "dead", "claim", at)})
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

// TestEventLogStablePoint: an event whose number was taken but which is not
// inserted yet holds back the events after it — a reader following the log
// by number would otherwise skip it — until it arrives, or until GapWait
// says its writer died.
func TestEventLogStablePoint(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_stable", GapWait: 2 * time.Second})
	ev := func(n int) store.Event {
		return store.Event{Client: "acme", Aggregate: "poll", AggregateID: "mail", Type: "poll.finished", Data: []byte(fmt.Sprintf(`{"n":%d}`, n))}
	}
	first, err := s.AppendEvent(ctx, ev(1))
	if err != nil {
		t.Fatal(err)
	}
	// A writer takes the next number and has not inserted its event yet.
	slow, err := s.nextSeqs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, ev(3)); err != nil {
		t.Fatal(err)
	}
	visible := func() (int64, int) {
		latest, err := s.LatestEventSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.ListEvents(ctx, store.EventQuery{Client: "acme", AfterSeq: first.Seq - 1})
		if err != nil {
			t.Fatal(err)
		}
		return latest, len(evs)
	}
	if latest, n := visible(); latest != first.Seq || n != 1 {
		t.Fatalf("with a number in flight: latest %d (want %d), %d events visible (want 1)", latest, first.Seq, n)
	}
	// The slow writer's event arrives: everything is visible, in order.
	e := toEventRecord("slow", ev(2))
	e.Seq, e.Inserted = slow, time.Now().UnixMicro()
	if _, err := s.events.InsertOne(ctx, e); err != nil {
		t.Fatal(err)
	}
	if latest, n := visible(); latest != slow+1 || n != 3 {
		t.Fatalf("after it arrived: latest %d, %d events", latest, n)
	}
	// A writer that dies with a number: the log moves on after GapWait.
	if _, err := s.nextSeqs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	last, err := s.AppendEvent(ctx, ev(5))
	if err != nil {
		t.Fatal(err)
	}
	if latest, _ := visible(); latest != slow+1 {
		t.Fatalf("before GapWait: latest %d", latest)
	}
	time.Sleep(2100 * time.Millisecond)
	if latest, n := visible(); latest != last.Seq || n != 4 {
		t.Fatalf("after GapWait: latest %d (want %d), %d events", latest, last.Seq, n)
	}
	// A new process starts from the shared stable point.
	s2, err := Open(ctx, Options{URI: testURI(t), Database: "jervis_test_stable"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if latest, err := s2.LatestEventSeq(ctx); err != nil || latest != last.Seq {
		t.Fatalf("second process: %d %v", latest, err)
	}
}

// TestRepeatedFlush: a writer that died after inserting its events but
// before pulling them from the outbox leaves them to be flushed again; the
// second flush stores nothing twice, and the numbers it took are filled by
// placeholders that hold no reader back and that no reader sees.
func TestRepeatedFlush(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_reflush", GapWait: time.Hour})
	// Enqueue's own flush ran: the created event is in the log. Put it
	// back into the outbox, as if the pull had not happened.
	if _, err := s.EnqueueTasks(ctx, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: "a"}); err != nil {
		t.Fatal(err)
	}
	id := store.TaskID("a", store.KindData, "")
	before, err := s.ListEvents(ctx, store.EventQuery{AggregateID: id})
	if err != nil || len(before) != 1 {
		t.Fatalf("events: %+v %v", before, err)
	}
	var r eventRecord
	if err := s.events.FindOne(ctx, bson.M{"_id": outboxKey(id, 0)}).Decode(&r); err != nil {
		t.Fatal(err)
	}
	r.Seq, r.Inserted = 0, 0
	if _, err := s.tasks.UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$push": bson.M{"outbox": r}}); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(ctx, s.tasks, []string{id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, store.Event{Client: "acme", Aggregate: "poll", Type: "poll.finished"}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListEvents(ctx, store.EventQuery{Client: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].AggregateID != id || all[1].Type != "poll.finished" {
		t.Fatalf("after the repeated flush: %+v", all)
	}
	latest, err := s.LatestEventSeq(ctx)
	if err != nil || latest != all[1].Seq {
		t.Fatalf("latest %d (%v), want %d: the unused number must not hold the log back", latest, err, all[1].Seq)
	}
}
