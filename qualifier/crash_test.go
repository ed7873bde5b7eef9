package qualifier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/childtest"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	"github.com/jervis-dev/jervis/kb/graph"
	graphsqlite "github.com/jervis-dev/jervis/kb/graph/sqlite"
	ragsqlite "github.com/jervis-dev/jervis/kb/rag/sqlite"
	"github.com/jervis-dev/jervis/pollers/kinds"
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
	k := kb.New(kb.Config{Graph: g, Chunks: c, Embedder: e, Aliases: st})
	// Identities are resolved while the qualifier runs, as in serve: a
	// kill lands in a merge as readily as in a task.
	ids := qualifier.NewIdentityLoop(st, k, nil)
	ids.Settle = 10 * time.Millisecond
	q, err := qualifier.New(qualifier.Config{Store: st, KB: k, OnIdentities: ids.Wake,
		Concurrency: 4, LeaseFor: 2 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	both := func(ctx context.Context) error {
		go ids.Run(ctx)
		return q.Run(ctx)
	}
	if err := pipelinetest.RunUntil(ctx, both, st, func(s store.Stats) bool {
		return s.Tasks["NEW"]+s.Tasks["RETRY"]+s.Tasks["QUALIFICATION_IN_PROGRESS"] == 0
	}); err != nil {
		return err
	}
	_, err = qualifier.NewIdentityLoop(st, k, nil).Pass(ctx)
	return err
}

type snapshot struct {
	Nodes, Edges map[string]int
	Chunks       int
	Tasks        store.Counts
	// Aliases are the resolved aliases; People every person node with
	// each of its edges and their evidence counts.
	Aliases []string
	People  map[string][]string
}

// prepare stores and indexes the demo corpus in dir.
func prepare(t *testing.T, dir string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutClient(context.Background(), store.Client{ID: "demo", Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	docs := append(loadDemo(t, st), loadPeople(t, st)...)
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
	as, _ := st.ListAliases(ctx, "demo")
	for _, a := range as {
		s.Aliases = append(s.Aliases, a.Alias+" → "+a.Canonical+" ("+a.Stage+")")
	}
	s.People = map[string][]string{}
	people, _ := g.For("demo").ListNodes(ctx, graph.NodeQuery{Type: "person", Limit: 1000})
	for _, p := range people {
		hood, _ := g.For("demo").Neighbors(ctx, graph.NeighborQuery{Start: []string{p.Key}, Depth: 1, Limit: 1000})
		for _, e := range hood.Edges {
			if e.From == p.Key || e.To == p.Key {
				s.People[p.Key] = append(s.People[p.Key], fmt.Sprintf("%s %d", e.Key(), len(e.EvidenceChunkIDs)))
			}
		}
		slices.Sort(s.People[p.Key])
	}
	return s
}

// loadPeople stores mail and issues of 60 people who each write from two
// addresses and hold a Jira account: identity resolution merges three refs
// per person.
func loadPeople(t *testing.T, st store.Store) []store.Document {
	t.Helper()
	first := []string{"Alma", "Boris", "Cleo", "Dario", "Edith", "Fabio", "Greta", "Hugo", "Ines", "Jonas"}
	last := []string{"Kovac", "Lind", "Moreau", "Novak", "Ortiz", "Petrov"}
	var docs []store.Document
	put := func(name string, raw []byte) {
		parsed, err := kinds.Default().Parse(name, raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range parsed {
			d.Client = "demo"
			stored, _, err := st.PutDocument(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, stored)
		}
	}
	for i, f := range first {
		for j, l := range last {
			n := i*len(last) + j
			user := strings.ToLower(f[:1] + l)
			for k, domain := range []string{"work.test", "home.test"} {
				put(fmt.Sprintf("m%d-%d.eml", n, k), fmt.Appendf(nil, "From: %s %s <%s@%s>\r\nTo: team@work.test\r\nSubject: Status %d-%d\r\n"+
					"Message-ID: <m%d-%d@work.test>\r\nDate: Mon, 2 Mar 2026 10:%02d:00 +0000\r\n\r\nMy status for week %d: the release is on track.\r\n",
					f, l, user, domain, n, k, n, k, n%60, k))
			}
			put(fmt.Sprintf("P-%d.json", n), fmt.Appendf(nil, `{"key":"P-%d","fields":{"summary":"Task %d","description":"Do task %d.","status":{"name":"Open"},`+
				`"updated":"2026-03-02T10:00:00.000+0000","assignee":{"name":"%s","displayName":"%s %s"}}}`, n, n, n, user, f, l))
		}
	}
	return docs
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
		as, _ := st.ListAliases(context.Background(), "demo")
		return s.Tasks["DONE"]+s.Tasks["READY_FOR_GPU"] >= 150 && len(as) > 0 // identities are being resolved
	})
	mid, _ := st.Stats(context.Background())
	as, _ := st.ListAliases(context.Background(), "demo")
	t.Logf("killed with %d tasks leased, %d done, %d aliases", mid.Tasks["QUALIFICATION_IN_PROGRESS"], mid.Tasks["DONE"]+mid.Tasks["READY_FOR_GPU"], len(as))
	// The restarted loop rescues the dead process's tasks once their 2 s
	// leases run out.
	st.Close()
	if err := child(crashed).Run(); err != nil {
		t.Fatal(err)
	}
	got := snap(t, crashed)
	if len(want.Aliases) < 120 {
		t.Fatalf("the reference run made %d aliases, want 2 per person of 60", len(want.Aliases))
	}
	if !reflect.DeepEqual(got.Nodes, want.Nodes) || !reflect.DeepEqual(got.Edges, want.Edges) || got.Chunks != want.Chunks ||
		!reflect.DeepEqual(got.Aliases, want.Aliases) || !reflect.DeepEqual(got.People, want.People) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("after crash and restart\n got %s\nwant %s", g, w)
	}
	if got.Tasks["DONE"]+got.Tasks["READY_FOR_GPU"] != want.Tasks["DONE"]+want.Tasks["READY_FOR_GPU"] || got.Tasks["FAILED"] != 0 {
		t.Fatalf("tasks %v, reference %v", got.Tasks, want.Tasks)
	}
}
