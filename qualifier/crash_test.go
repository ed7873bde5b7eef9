package qualifier_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/childtest"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	graphsqlite "github.com/jervis-dev/jervis/kb/graph/sqlite"
	ragsqlite "github.com/jervis-dev/jervis/kb/rag/sqlite"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

const childEnv = "JERVISTEST_QUALIFIER_CHILD"

func TestMain(m *testing.M) { childtest.Main(m, childEnv, qualifyAll) }

// qualifyAll runs the qualifier over the store in dir until no task waits.
func qualifyAll(dir string) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := graphsqlite.Open(ctx, filepath.Join(dir, graphsqlite.FileName))
	if err != nil {
		return err
	}
	defer g.Close()
	c, err := ragsqlite.Open(ctx, filepath.Join(dir, ragsqlite.FileName))
	if err != nil {
		return err
	}
	defer c.Close()
	e, err := glove.New()
	if err != nil {
		return err
	}
	q, err := qualifier.New(qualifier.Config{Store: st, KB: kb.New(kb.Config{Graph: g, Chunks: c, Embedder: e, Aliases: st}),
		Concurrency: 4, LeaseFor: 2 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	return pipelinetest.RunUntil(ctx, q.Run, st, func(s store.Stats) bool {
		return s.Tasks["NEW"]+s.Tasks["RETRY"]+s.Tasks["QUALIFICATION_IN_PROGRESS"] == 0
	})
}

type snapshot struct {
	Nodes, Edges map[string]int
	Chunks       int
	Tasks        store.Counts
}

// prepare stores and indexes the demo corpus in dir.
func prepare(t *testing.T, dir string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	docs := loadDemo(t, st)
	ix, _ := indexers.New(st, indexers.Config{PollInterval: 10 * time.Millisecond})
	runUntil(t, ix, func(s store.Stats) bool { return s.Documents["INDEXED"] == int64(len(docs)) }, st)
}

func snap(t *testing.T, dir string) snapshot {
	t.Helper()
	ctx := context.Background()
	st, _ := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	defer st.Close()
	g, _ := graphsqlite.Open(ctx, filepath.Join(dir, graphsqlite.FileName))
	defer g.Close()
	c, _ := ragsqlite.Open(ctx, filepath.Join(dir, ragsqlite.FileName))
	defer c.Close()
	var s snapshot
	s.Nodes, _ = g.For("demo").CountByType(ctx)
	s.Edges, _ = g.For("demo").CountEdgesByType(ctx)
	s.Chunks, _ = c.For("demo").Count(ctx)
	stats, _ := st.Stats(ctx)
	s.Tasks = stats.Tasks
	return s
}

func child(dir string) *exec.Cmd { return childtest.Command(childEnv, dir) }

func TestKilledQualificationCompletesOnceOnRestart(t *testing.T) {
	t.Parallel()
	reference, crashed := t.TempDir(), t.TempDir()
	prepare(t, reference)
	prepare(t, crashed)
	if err := child(reference).Run(); err != nil {
		t.Fatal(err)
	}
	want := snap(t, reference)

	cmd := child(crashed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, _ := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(crashed, sqlite.FileName)})
	childtest.KillWhen(t, cmd, func() bool {
		s, _ := st.Stats(context.Background())
		return s.Tasks["DONE"]+s.Tasks["READY_FOR_GPU"] >= 150
	})
	mid, _ := st.Stats(context.Background())
	t.Logf("killed with %d tasks leased, %d done", mid.Tasks["QUALIFICATION_IN_PROGRESS"], mid.Tasks["DONE"]+mid.Tasks["READY_FOR_GPU"])
	// The restarted loop rescues the dead process's tasks once their 2 s
	// leases run out.
	st.Close()
	if err := child(crashed).Run(); err != nil {
		t.Fatal(err)
	}
	got := snap(t, crashed)
	if !reflect.DeepEqual(got.Nodes, want.Nodes) || !reflect.DeepEqual(got.Edges, want.Edges) || got.Chunks != want.Chunks {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("after crash and restart\n got %s\nwant %s", g, w)
	}
	if got.Tasks["DONE"]+got.Tasks["READY_FOR_GPU"] != want.Tasks["DONE"]+want.Tasks["READY_FOR_GPU"] || got.Tasks["FAILED"] != 0 {
		t.Fatalf("tasks %v, reference %v", got.Tasks, want.Tasks)
	}
}
