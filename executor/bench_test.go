package executor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/executor"
)

// BenchmarkPreemption measures how fast a user request stops background
// work, over the real stack: the API on loopback with the monitor as its
// tracker, the executor running the workflow agent against an Ollama-
// protocol server that streams an endless answer. Each iteration waits
// until the model call is in flight, sends a user request, and times (from
// just before the request is sent) the task's context being cancelled
// (cancel-ms: the run's stop time in the event log) and the model request
// being aborted (abort-ms: the server sees the client go). The idle
// threshold is 1 ms, so the task runs again at once. Run with
// -benchtime=1000x for 1,000 preemptions.
func BenchmarkPreemption(b *testing.B) {
	e := newEnv(b, 1)
	m := executor.NewMonitor(time.Millisecond)
	url, key := e.serveAPI(b, m)
	o := newOllama(func(int) (int, time.Duration) { return 1_000_000, 5 * time.Millisecond })
	e.run(b, m, e.agent(b, o))
	path := url + "/api/v1/tasks?limit=1"

	sent := make([]time.Time, 0, b.N)
	aborts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		select {
		case <-o.arrived:
		case <-time.After(10 * time.Second):
			b.Fatal("the executor did not call the model again")
		}
		t0 := time.Now()
		get(b, path, key)
		select {
		case at := <-o.aborted:
			aborts = append(aborts, at.Sub(t0))
		case <-time.After(10 * time.Second):
			b.Fatal("the model request was not aborted")
		}
		sent = append(sent, t0)
	}
	b.StopTimer()
	var cancels []time.Duration
	for _, r := range e.runs(b) {
		if r.Outcome == "preempted" && len(cancels) < len(sent) {
			cancels = append(cancels, r.Stopped.Sub(sent[len(cancels)]))
		}
	}
	if len(cancels) != len(sent) {
		b.Fatalf("%d preempted runs for %d user requests", len(cancels), len(sent))
	}
	report := func(ds []time.Duration, name string) {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, name+"-p99-ms")
	}
	report(cancels, "cancel")
	report(aborts, "abort")
	b.ReportMetric(0, "ns/op")
}
