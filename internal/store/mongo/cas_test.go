package mongo

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/jervis-dev/jervis/internal/store"
)

// TestCompareAndSetAllSomeStale: a bulk compare-and-set only some of whose
// records are still at the revision read tells which were applied (read
// back by its token), and only those changed and carry its event.
func TestCompareAndSetAllSomeStale(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_cas"})
	var tasks []store.Task
	for _, d := range []string{"a", "b", "c"} {
		tasks = append(tasks, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: d})
	}
	if _, err := s.EnqueueTasks(ctx, tasks...); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var cs []cas
	now := time.Now()
	for _, d := range []string{"a", "b", "c"} {
		id := store.TaskID(d, store.KindData, "")
		var r taskRecord
		if err := s.tasks.FindOne(ctx, bson.M{"_id": id}).Decode(&r); err != nil {
			t.Fatal(err)
		}
		cur := r.task()
		cur.State = store.TaskQualifying
		ids = append(ids, id)
		cs = append(cs, cas{id, r.Rev, bson.M{"state": string(cur.State), "leaseOwner": "w"}, store.TaskStateEvent(cur, store.TaskNew, "w", "claim", now)})
	}
	// Another writer moves b on between the read and the bulk write.
	if _, err := s.tasks.UpdateOne(ctx, bson.M{"_id": ids[1]}, bson.M{"$inc": bson.M{"rev": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	applied, err := s.compareAndSetAll(ctx, s.tasks, cs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true}; !slices.Equal(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	for i, id := range ids {
		var r taskRecord
		if err := s.tasks.FindOne(ctx, bson.M{"_id": id}).Decode(&r); err != nil {
			t.Fatal(err)
		}
		states := 0
		for _, e := range r.Outbox {
			if e.Type == store.EventTaskState {
				states++
			}
		}
		if got := r.State == string(store.TaskQualifying); got != applied[i] || states != map[bool]int{true: 1}[applied[i]] {
			t.Errorf("%s: state %s, %d state events in its outbox; applied %v", id, r.State, states, applied[i])
		}
	}
	// None matching reads nothing back and applies nothing.
	if applied, err := s.compareAndSetAll(ctx, s.tasks, cs); err != nil || slices.Contains(applied, true) {
		t.Fatalf("a second time: %v %v", applied, err)
	}
}

// TestTransitionsOfMovedRecords: transitions checked against records that
// moved before the bulk write (a lease extended meanwhile) are applied one
// by one, read again; a task named twice is transitioned in order; each
// applied transition's event reaches the log once.
func TestTransitionsOfMovedRecords(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_moved"})
	for _, d := range []string{"a", "b"} {
		if _, err := s.EnqueueTasks(ctx, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: d}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	got, err := s.ClaimTasks(ctx, store.StageQualify, store.Claim{Owner: "w", Limit: 2, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	a, b := store.TaskID("a", store.KindData, ""), store.TaskID("b", store.KindData, "")
	if n, err := s.ExtendTaskLeases(ctx, "w", []string{b}, now.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("extend: %d %v", n, err)
	}
	read := func(ids []string) (map[string]taskRecord, error) {
		recs, err := s.findTasks(ctx, bson.M{"_id": bson.M{"$in": ids}})
		if err == nil {
			for i := range recs {
				if recs[i].ID == b {
					recs[i].Rev-- // as read before the extension
				}
			}
		}
		return byID(recs, func(r taskRecord) string { return r.ID }), err
	}
	ts := []store.TaskTransition{
		{ID: a, From: store.TaskQualifying, To: store.TaskReadyForGPU, Owner: "w"},
		{ID: b, From: store.TaskQualifying, To: store.TaskDone, Owner: "w"},
		{ID: a, From: store.TaskReadyForGPU, To: store.TaskCancelled, Reason: "admin"},
	}
	err = transitionAll(ctx, s, s.tasks, ts, func(t store.TaskTransition) string { return t.ID }, read, checkTask(now),
		func(t store.TaskTransition) error { return s.transitionTask(ctx, t, now) })
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{a: {"NEW", "QUALIFICATION_IN_PROGRESS", "READY_FOR_GPU", "CANCELLED"}, b: {"NEW", "QUALIFICATION_IN_PROGRESS", "DONE"}} {
		task, err := s.GetTask(ctx, "acme", id)
		if err != nil || string(task.State) != want[len(want)-1] {
			t.Fatalf("%s: %s %v, want %s", id, task.State, err, want[len(want)-1])
		}
		evs, err := s.ListEvents(ctx, store.EventQuery{AggregateID: id})
		if err != nil {
			t.Fatal(err)
		}
		states := []string{"NEW"}
		for _, e := range evs {
			if e.Type == store.EventTaskState {
				var c store.StateChange
				if err := json.Unmarshal(e.Data, &c); err != nil {
					t.Fatal(err)
				}
				states = append(states, c.To)
			}
		}
		if !slices.Equal(states, want) {
			t.Errorf("%s: states in the log %v, want %v", id, states, want)
		}
	}
}
