package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/pollers/importer"
)

// serve --demo with the executor (no model: the extractive workflow) leaves
// a digest for every task the qualifier routed READY_FOR_GPU: stored with
// the task and as a result node linked to the document's node.
func TestServeDemoExecutorDigestsEveryReadyTask(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cmd := jervis(t, "serve", "--demo", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers,qualifier,executor", "--log-format", "json")
	cmd.Env = append(cmd.Env, "JERVIS_EXECUTOR_IDLE_AFTER=10ms")
	lines := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	waitLog(t, lines, "jervis serving")
	go func() {
		for range lines {
		}
	}()
	var st store.Stats
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		st = statusOf(t, data)
		waiting := st.Documents["NEW"] + st.Documents["INDEXING"] + st.Tasks["NEW"] + st.Tasks["RETRY"] + st.Tasks["QUALIFICATION_IN_PROGRESS"] +
			st.Tasks["READY_FOR_GPU"] + st.Tasks["EXECUTION"]
		if st.Documents["INDEXED"] == 411 && waiting == 0 {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if st.Tasks["COMPLETED"] == 0 || st.Tasks["READY_FOR_GPU"]+st.Tasks["EXECUTION"]+st.Tasks["FAILED"] != 0 {
		t.Fatalf("tasks: %v", st.Tasks)
	}

	all := embeddedtest.Open(t, data)
	ctx := context.Background()
	tasks, err := all.Store.ListTasks(ctx, store.TaskQuery{Client: importer.DemoClient, Kind: store.KindData, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ready, shown := 0, 0
	for _, task := range tasks {
		mem, err := all.Store.GetTaskMemory(ctx, importer.DemoClient, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if mem.RoutingDecision != store.TaskReadyForGPU {
			continue
		}
		ready++
		var out executor.Output
		if err := json.Unmarshal(task.Result, &out); task.State != store.TaskCompleted || err != nil || out.Digest == nil || out.Text == "" {
			t.Fatalf("task %s: %s, result %s", task.ID, task.State, task.Result)
		}
		node, err := all.Graph.For(importer.DemoClient).Node(ctx, out.ResultNode)
		if err != nil || len(node.RAGChunks) == 0 {
			t.Fatalf("result node %s: %+v %v", out.ResultNode, node, err)
		}
		if shown < 5 && ready%6 == 1 {
			shown++
			t.Logf("digest of task %s:\n%s", task.ID, out.Text)
		}
		if d := out.Digest; len(d.Questions)+len(d.Requests)+len(d.Decisions) == 0 && !strings.Contains(out.Text, "Nothing is asked in so many words") {
			t.Fatalf("digest of %s says nothing of what is asked:\n%s", task.ID, out.Text)
		}
	}
	if int64(ready) != st.Tasks["COMPLETED"] || ready == 0 {
		t.Fatalf("%d tasks routed READY_FOR_GPU, %d COMPLETED", ready, st.Tasks["COMPLETED"])
	}
	t.Logf("%d READY_FOR_GPU tasks, every one with a digest", ready)
}
