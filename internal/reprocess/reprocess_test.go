package reprocess_test

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier"
)

type env struct {
	st     *sqlite.Store
	graph  graph.Store
	chunks rag.Store
	kb     *kb.KB
}

func newEnv(t *testing.T) env {
	t.Helper()
	all := embeddedtest.Open(t, "")
	return env{st: all.Store, graph: all.Graph, chunks: all.Chunks, kb: all.KB.KB}
}

// load stores the demo corpus's emails, issues and pages as client.
func (e env) load(t *testing.T, client string) int {
	n := 0
	for _, dir := range []string{"email", "jira", "confluence"} {
		err := fs.WalkDir(deploy.Demo(), dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, _ := fs.ReadFile(deploy.Demo(), path)
			docs, err := kinds.Default().Parse(path, raw)
			for _, doc := range docs {
				doc.Client = client
				if _, _, err := e.st.PutDocument(t.Context(), doc); err != nil {
					return err
				}
				n++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// drain runs the indexers and the qualifier until nothing is waiting; the
// links only recorded are recorded with their documents when recorded
// (as serve runs them), each by its own task otherwise.
func (e env) drain(t *testing.T, recorded bool) store.Stats {
	t.Helper()
	var links indexers.LinkTriage
	if recorded {
		var err error
		if links, err = qualifier.LinkTriage(e.st, "", false); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := indexers.New(e.st, indexers.Config{PollInterval: 10 * time.Millisecond, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	q, err := qualifier.New(qualifier.Config{Store: e.st, KB: e.kb, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	go func() { done <- ix.Run(ctx) }()
	go func() { done <- q.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s, err := e.st.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s.Documents["NEW"]+s.Documents["INDEXING"] == 0 && s.Tasks["NEW"]+s.Tasks["QUALIFICATION_IN_PROGRESS"]+s.Tasks["RETRY"] == 0 {
			return s
		}
	}
	t.Fatal("the pipeline did not drain")
	return store.Stats{}
}

// snapshot lists a client's projection: every node with its chunks and
// every edge with its evidence, as sorted lines.
func (e env) snapshot(t *testing.T, client string) []string {
	t.Helper()
	g := e.graph.For(client)
	var out []string
	after := ""
	for {
		page, err := g.ListNodes(t.Context(), graph.NodeQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, n := range page {
			out = append(out, "node "+n.Key+" "+strings.Join(n.RAGChunks, ","))
			hood, err := g.Neighbors(t.Context(), graph.NeighborQuery{Start: []string{n.Key}, Depth: 1, Direction: graph.Out, Limit: 100000})
			if err != nil {
				t.Fatal(err)
			}
			for _, ed := range hood.Edges {
				if ed.From == n.Key {
					out = append(out, "edge "+ed.Key()+" "+strings.Join(ed.EvidenceChunkIDs, ","))
				}
			}
		}
		after = page[len(page)-1].Key
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Links each recorded by its own task, and links recorded with their
// documents (their tasks made DONE when indexed, left by the replay to
// their documents' tasks), are rebuilt alike.
func TestWipeAndReprocessRebuildsTheSameProjection(t *testing.T) {
	t.Parallel()
	for _, recorded := range []bool{false, true} {
		t.Run(fmt.Sprint("recorded with their documents=", recorded), func(t *testing.T) {
			t.Parallel()
			wipeAndReprocess(t, recorded)
		})
	}
}

func wipeAndReprocess(t *testing.T, recorded bool) {
	e := newEnv(t)
	docs := e.load(t, "demo")
	e.load(t, "other") // a second client, untouched by demo's replay
	before := e.drain(t, recorded)
	want := e.snapshot(t, "demo")
	links, err := e.st.ListTasks(t.Context(), store.TaskQuery{Client: "demo", Kind: store.KindLink, State: store.TaskDone, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	made := 0 // DONE when indexed: never claimed
	for _, l := range links {
		if l.MadeDone() {
			made++
		}
	}
	if recorded != (made > 0) || made > 0 && made != len(links) {
		t.Fatalf("%d of %d link tasks made DONE when indexed", made, len(links))
	}
	other := e.snapshot(t, "other")
	if len(want) < 1000 {
		t.Fatalf("a projection of %d lines is too small to prove anything", len(want))
	}

	// A dry run counts and changes nothing.
	dry, err := reprocess.Run(t.Context(), e.st, e.kb, reprocess.Request{Client: "demo", DryRun: true, Wipe: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Selected != docs || dry.Processed != docs || dry.DocumentsReset != docs || dry.TasksReset != int(finished(before.TasksByClient["demo"]))-made || dry.Wiped {
		t.Fatalf("dry run %+v for %d documents, stats before %v", dry, docs, before.Tasks)
	}
	if after, _ := e.st.Stats(t.Context()); fmt.Sprint(after.Tasks) != fmt.Sprint(before.Tasks) || !slices.Equal(e.snapshot(t, "demo"), want) {
		t.Fatalf("the dry run changed something: %v", after.Tasks)
	}

	// Wipe and replay: progress advances one document at a time.
	var seen []int
	p, err := reprocess.Run(t.Context(), e.st, e.kb, reprocess.Request{Client: "demo", Wipe: true}, func(p reprocess.Progress) { seen = append(seen, p.Processed) })
	if err != nil {
		t.Fatal(err)
	}
	if !p.Wiped || p.Processed != docs || p.DocumentsReset != docs || p.TasksReset != dry.TasksReset || p.Conflicts != 0 || len(seen) != docs+1 || !slices.IsSorted(seen) {
		t.Fatalf("replay %+v, progress calls %d", p, len(seen))
	}
	if counts, _ := e.graph.For("demo").CountByType(t.Context()); len(counts) != 0 {
		t.Fatalf("wiped graph still has %v", counts)
	}
	e.drain(t, recorded)
	got := e.snapshot(t, "demo")
	if !slices.Equal(got, want) {
		missing, extra := diff(want, got), diff(got, want)
		t.Fatalf("rebuilt projection differs: %d lines missing (e.g. %.3q), %d extra (e.g. %.3q)", len(missing), missing, len(extra), extra)
	}
	if !slices.Equal(e.snapshot(t, "other"), other) {
		t.Fatal("another client's projection changed")
	}
}

func TestSelectTakesTheLatestVersionsInRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	put := func(ext, body string, observed time.Time, src store.SourceType) store.Document {
		d, _, err := e.st.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: src, ExternalID: ext, Raw: []byte(body), ObservedAt: observed})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	put("a", "v1", day(1), store.SourceFile)
	a2 := put("a", "v2", day(2), store.SourceFile)
	b := put("b", "only", day(3), store.SourceFile)
	j := put("OPS-1", "issue", day(4), store.SourceJira)
	for _, tc := range []struct {
		req  reprocess.Request
		want []string
	}{
		{reprocess.Request{Client: "acme"}, []string{a2.ID, b.ID, j.ID}},
		{reprocess.Request{Client: "acme", SourceType: "FILE"}, []string{a2.ID, b.ID}},
		{reprocess.Request{Client: "acme", Since: new(day(3))}, []string{b.ID, j.ID}},
		{reprocess.Request{Client: "acme", Until: new(day(3))}, []string{a2.ID}},
		{reprocess.Request{Client: "acme", DocumentIDs: []string{j.ID, "unknown"}}, []string{j.ID}},
	} {
		docs, err := reprocess.Select(t.Context(), e.st, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range docs {
			ids = append(ids, d.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.req, ids, tc.want)
		}
	}
	for _, bad := range []reprocess.Request{
		{Client: "Bad Client!"}, {Client: "acme", SourceType: "FAX"}, {Client: "acme", Wipe: true, SourceType: "FILE"},
		{Client: "acme", Since: new(day(3)), Until: new(day(2))},
	} {
		if err := bad.Validate(kinds.Default().SourceTypes()...); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

// finished counts the tasks a replay sends back.
func finished(c store.Counts) int64 {
	return c["DONE"] + c["READY_FOR_GPU"] + c["COMPLETED"] + c["FAILED"] + c["CANCELLED"]
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			out = append(out, x)
		}
	}
	return out
}
