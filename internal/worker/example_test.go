package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/internal/worker"
)

// A qualifier-shaped worker: claim NEW tasks, route each, stop when done.
func ExampleWorker() {
	dir, _ := os.MkdirTemp("", "jervis-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	_, _ = s.EnqueueTasks(ctx,
		store.Task{Kind: store.KindData, Client: "demo", SourceDoc: "newsletter"},
		store.Task{Kind: store.KindData, Client: "demo", SourceDoc: "review-request"},
	)

	route := worker.HandlerFunc[store.Task](func(ctx context.Context, j worker.Job[store.Task]) (worker.Result, error) {
		if j.Item.SourceDoc == "review-request" {
			return worker.Result{Next: string(store.TaskReadyForGPU)}, nil // needs the executor
		}
		return worker.Result{}, nil // the stage's default: DONE
	})
	w, err := worker.New(store.TaskQueue{Tasks: s, Stage: store.StageQualify}, route, worker.Config{Name: "qualifier", PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	for {
		st, _ := s.Stats(ctx)
		if st.Tasks["DONE"]+st.Tasks["READY_FOR_GPU"] == 2 {
			fmt.Println("DONE:", st.Tasks["DONE"], "READY_FOR_GPU:", st.Tasks["READY_FOR_GPU"])
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// DONE: 1 READY_FOR_GPU: 1
	// stopped: <nil>
}
