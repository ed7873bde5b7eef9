package mongo_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/event"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
)

// BenchmarkTaskCycle enqueues tasks in batches of 100, then claims them 32
// at a time and completes each batch with one TransitionTasks, reporting
// tasks/s and the server commands each task costs (counted by the driver's
// command monitor: the design's cost, whatever the server's speed). Run it
// against the server you deploy on: TEST_MONGO_URI=... go test
// ./internal/store/mongo -run '^$' -bench TaskCycle -benchtime=2000x.
func BenchmarkTaskCycle(b *testing.B) {
	s, commands := openCounting(b)
	ctx := context.Background()
	b.ResetTimer()
	start := commands.Load()
	for i := 0; i < b.N; i += 100 {
		batch := make([]store.Task, 0, 100)
		for j := i; j < min(b.N, i+100); j++ {
			batch = append(batch, store.Task{Client: "acme", Kind: store.KindData, SourceDoc: fmt.Sprint("d", j)})
		}
		if _, err := s.EnqueueTasks(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	enqueue := commands.Load() - start
	cycle(b, func(c store.Claim) ([]store.Task, error) { return s.ClaimTasks(ctx, store.StageQualify, c) }, 32,
		func(got []store.Task) error {
			ts := make([]store.TaskTransition, len(got))
			for i, t := range got {
				ts[i] = store.TaskTransition{ID: t.ID, From: store.TaskQualifying, To: store.TaskDone, Owner: "bench"}
			}
			return s.TransitionTasks(ctx, ts)
		})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(enqueue)/float64(b.N), "enqueue-cmds/task")
	b.ReportMetric(float64(commands.Load()-start-enqueue)/float64(b.N), "claim+complete-cmds/task")
}

// BenchmarkDocumentCycle stores new documents in pages of 100, then claims
// them 64 at a time, as the indexers do, and marks each batch INDEXED with
// one TransitionDocuments, reporting documents/s and the server commands
// each claim and completion costs.
func BenchmarkDocumentCycle(b *testing.B) {
	s, commands := openCounting(b)
	ctx := context.Background()
	for i := 0; i < b.N; i += 100 {
		page := make([]store.Document, 0, 100)
		for j := i; j < min(b.N, i+100); j++ {
			id := fmt.Sprint("ISSUE-", j)
			page = append(page, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: id, Raw: []byte(id),
				Normalized: store.Normalized{Title: id, Body: "an issue"}})
		}
		if _, err := s.PutDocuments(ctx, page); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := commands.Load()
	cycle(b, func(c store.Claim) ([]store.Document, error) { return s.ClaimDocuments(ctx, c) }, 64,
		func(got []store.Document) error {
			ts := make([]store.DocumentTransition, len(got))
			for i, d := range got {
				ts[i] = store.DocumentTransition{ID: d.ID, From: store.DocIndexing, To: store.DocIndexed, Owner: "bench"}
			}
			return s.TransitionDocuments(ctx, ts)
		})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(commands.Load()-start)/float64(b.N), "claim+complete-cmds/doc")
}

// BenchmarkPutDocuments stores new documents in pages of 100, as a
// poller's page or an import's run puts them, reporting documents/s and
// the server commands each costs.
func BenchmarkPutDocuments(b *testing.B) {
	s, commands := openCounting(b)
	ctx := context.Background()
	body := strings.Repeat("a line of an issue's description ", 30)
	b.ResetTimer()
	start := commands.Load()
	for i := 0; i < b.N; i += 100 {
		page := make([]store.Document, 0, 100)
		for j := i; j < min(b.N, i+100); j++ {
			id := fmt.Sprint("ISSUE-", j)
			page = append(page, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: id, Raw: []byte(id + body),
				Normalized: store.Normalized{Title: id, Body: body}})
		}
		rs, err := s.PutDocuments(ctx, page)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil || !r.Created {
				b.Fatalf("%+v", r)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(commands.Load()-start)/float64(b.N), "cmds/doc")
}

// BenchmarkQualifierSaves saves what the rules qualifier saves for a batch
// of 32 documents besides their transitions — three TaskMemories a document
// (its data task and two link tasks, as on the dev Jira corpus) and the
// identity facts its item states (six) — reporting documents/s and the
// server commands each costs.
func BenchmarkQualifierSaves(b *testing.B) {
	s, commands := openCounting(b)
	ctx := context.Background()
	seen := time.Now()
	b.ResetTimer()
	start := commands.Load()
	for i := 0; i < b.N; i += 32 {
		var ms []store.TaskMemory
		var sets []store.IdentityFactSet
		for j := i; j < min(b.N, i+32); j++ {
			for k := range 3 {
				ms = append(ms, store.TaskMemory{TaskID: fmt.Sprintf("t%d-%d", j, k), Client: "acme", ContextSummary: "an issue's summary",
					RoutingDecision: store.TaskDone, SourceType: store.SourceJira, SourceID: fmt.Sprint("d", j)})
			}
			var facts []store.IdentityFact
			for k := range 6 {
				facts = append(facts, store.IdentityFact{Ref: fmt.Sprint("person:p", (j+k)%50), Kind: store.FactName, Value: fmt.Sprint("person ", (j+k)%50),
					Evidence: "Assignee: someone", Seen: seen})
			}
			sets = append(sets, store.IdentityFactSet{Client: "acme", Source: fmt.Sprint("jira:i-", j), Facts: facts})
		}
		if err := s.SaveTaskMemories(ctx, ms); err != nil {
			b.Fatal(err)
		}
		if err := s.PutIdentityFactSets(ctx, sets); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(commands.Load()-start)/float64(b.N), "cmds/doc")
}

// cycle claims b.N items, limit at a time, completing each claim's by
// complete, as a worker loop does.
func cycle[T any](b *testing.B, claim func(store.Claim) ([]T, error), limit int, complete func([]T) error) {
	for done := 0; done < b.N; {
		now := time.Now()
		got, err := claim(store.Claim{Owner: "bench", Limit: limit, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatalf("nothing to claim after %d of %d", done, b.N)
		}
		if err := complete(got); err != nil {
			b.Fatal(err)
		}
		done += len(got)
	}
}

// openCounting opens a store on a database of its own (dropped after the
// benchmark) whose driver counts the commands it sends.
func openCounting(b *testing.B) (*mongo.Store, *atomic.Int64) {
	uri := integration.Env(b, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
	commands := new(atomic.Int64)
	db := fmt.Sprintf("jervis_bench_%d", time.Now().UnixNano()%1e9)
	s, err := mongo.Open(context.Background(), mongo.Options{URI: uri, Database: db, Monitor: &event.CommandMonitor{
		Started: func(context.Context, *event.CommandStartedEvent) { commands.Add(1) },
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Drop(context.Background()); _ = s.Close() })
	if server, err := s.ServerVersion(context.Background()); err == nil {
		b.Logf("server: %s", server)
	}
	return s, commands
}
