package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/worker"
)

// BenchmarkEnqueue measures task enqueue throughput into SQLite, in batches
// of 100 (as an indexer writes the tasks of a batch of documents).
func BenchmarkEnqueue(b *testing.B) {
	s := openStore(b, "")
	const batch = 100
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		ts := make([]store.Task, 0, batch)
		for j := i; j < min(b.N, i+batch); j++ {
			ts = append(ts, store.Task{Kind: store.KindData, Client: "acme", SourceDoc: fmt.Sprint("e", j)})
		}
		if _, err := s.EnqueueTasks(context.Background(), ts...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkClaimComplete measures claim → handle (no-op) → ack throughput of
// the worker loop on SQLite: b.N tasks, each claimed in batches, handled and
// acked DONE, with 1 and 8 workers sharing the database.
func BenchmarkClaimComplete(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := openStore(b, "")
			enqueue(b, s, b.N, "bench")
			var handled atomic.Int64
			h := worker.HandlerFunc[store.Task](func(context.Context, worker.Job[store.Task]) (worker.Result, error) {
				handled.Add(1)
				return worker.Result{}, nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			b.ResetTimer()
			for i := range workers {
				w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, h, worker.Config{
					Name: fmt.Sprint("bench", i), Concurrency: 128, BatchSize: 128, PollInterval: 5 * time.Millisecond,
				})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() { _ = w.Run(ctx) })
			}
			// Poll a counter, not the store, until the last task is handled;
			// then wait for its ack to land.
			for handled.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			for {
				st, err := s.Stats(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if st.Tasks["DONE"] == int64(b.N) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
