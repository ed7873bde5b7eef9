package executor_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/internal/childtest"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

const childEnv = "JERVISTEST_EXECUTOR_CHILD"

func TestMain(m *testing.M) { childtest.Main(m, childEnv, executeAll) }

// executeAll runs the executor (extractive workflow, 2 s leases) over the
// data directory dir until no task waits for it.
func executeAll(dir string) error {
	ctx := context.Background()
	all, err := embedded.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer all.Close()
	x, err := executor.New(executor.Config{Store: all.Store, KB: all.KB.KB, Monitor: executor.NewMonitor(time.Millisecond),
		LeaseFor: 2 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	return pipelinetest.RunUntil(ctx, x.Run, all.Store, func(s store.Stats) bool { return s.Tasks["READY_FOR_GPU"]+s.Tasks["EXECUTION"] == 0 })
}

type outcome struct {
	Nodes, Edges map[string]int
	Chunks       int
	Tasks        store.Counts
	Results      map[string]string // task → result node
}

func outcomeOf(t *testing.T, dir string) outcome {
	t.Helper()
	all := embeddedtest.Open(t, dir)
	defer all.Close()
	ctx := context.Background()
	var o outcome
	o.Nodes, _ = all.Graph.For(client).CountByType(ctx)
	o.Edges, _ = all.Graph.For(client).CountEdgesByType(ctx)
	o.Chunks, _ = all.Chunks.For(client).Count(ctx)
	s, _ := all.Store.Stats(ctx)
	o.Tasks = s.Tasks
	tasks, _ := all.Store.ListTasks(ctx, store.TaskQuery{Client: client, State: store.TaskCompleted, Limit: 1000})
	o.Results = map[string]string{}
	for _, tk := range tasks {
		var out executor.Output
		json.Unmarshal(tk.Result, &out)
		o.Results[tk.ID] = out.ResultNode
	}
	return o
}

func executorChild(dir string) *exec.Cmd { return childtest.Command(childEnv, dir) }

// An executor process killed with SIGKILL in the middle of the queue,
// restarted, completes every task once: the same tasks, result nodes,
// edges and chunks as an uninterrupted run.
func TestKilledExecutionCompletesOnceOnRestart(t *testing.T) {
	t.Parallel()
	const n = 80
	reference, crashed := t.TempDir(), t.TempDir()
	for _, dir := range []string{reference, crashed} {
		all := embeddedtest.Open(t, dir)
		readyTasks(t, all, n)
		all.Close()
	}
	if err := executorChild(reference).Run(); err != nil {
		t.Fatal(err)
	}
	want := outcomeOf(t, reference)
	if want.Tasks["COMPLETED"] != n || len(want.Results) != n || want.Nodes["result"] != n {
		t.Fatalf("reference run: %+v", want)
	}

	cmd := executorChild(crashed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	all := embeddedtest.Open(t, crashed)
	childtest.KillWhen(t, cmd, func() bool {
		s, _ := all.Store.Stats(context.Background())
		return s.Tasks["COMPLETED"] >= n/4
	})
	mid, _ := all.Store.Stats(context.Background())
	all.Close()
	t.Logf("killed with %d tasks in EXECUTION, %d COMPLETED", mid.Tasks["EXECUTION"], mid.Tasks["COMPLETED"])
	// The restarted loop rescues the dead process's tasks once their 2 s
	// leases run out.
	if err := executorChild(crashed).Run(); err != nil {
		t.Fatal(err)
	}
	got := outcomeOf(t, crashed)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("after the crash and a restart\n got %s\nwant %s", g, w)
	}
}
