package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// jervis bench on a small corpus: every figure is there, the trickled
// documents are all found by search, and the table names each part.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	jira, mail, _ := evalCorpus(t)
	code, out, errOut := runCLI(t, nil, "bench", "--json", "--trickle", "5", "--corpus", jira+","+mail)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err, out)
	}
	r := rep.Roofline
	if r.SQLiteTxPerSecond <= 0 || r.SQLiteRowsPerSecond <= r.SQLiteTxPerSecond || r.EmbedPerSecond <= 0 || r.VectorScanPerSecond <= 0 || r.EmbeddingDimensions == 0 {
		t.Errorf("roofline %+v", r)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("runs %+v", rep.Runs)
	}
	x := rep.Runs[0]
	// 5 issues, 3 messages, 5 trickled notes.
	if x.Documents != 8 || x.Chunks == 0 || x.DocsPerSecond <= 0 || x.QualifySeconds <= 0 || x.PipelineCPUPer1000 <= 0 || x.PeakRSSBytes <= 0 || x.DiskBytesPer1000 <= 0 {
		t.Errorf("run %+v", x)
	}
	if x.Freshness.N != 5 || x.Freshness.Missed != 0 || x.Freshness.P50 <= 0 || x.Freshness.P99 < x.Freshness.P50 {
		t.Errorf("freshness %+v", x.Freshness)
	}
	if x.Search1.N == 0 || x.Search16.N*searchPasses != 16*x.Search1.N || x.Search16.PerSecond <= 0 {
		t.Errorf("search %+v %+v", x.Search1, x.Search16)
	}
	// The import read the corpus, the stores wrote the documents: on
	// Linux, where the calls are counted.
	if c := x.IOPer1000; runtime.GOOS == "linux" && (c == nil || c.ReadBytes <= 0 || c.ReadCalls <= 0 || c.WrittenBytes <= 0 || c.WriteCalls <= 0 || c.WrittenBytes < c.WriteCalls) {
		t.Errorf("I/O per 1,000 documents %+v", c)
	}
	// The embedded databases' writers while the bulk was indexed and
	// qualified: each wrote, none held longer than the stages took.
	files := map[string]bool{}
	for _, w := range x.Writers {
		files[w.File] = true
		if w.HeldShare < 0 || w.HeldShare > 1 || w.WaitedSeconds < 0 || w.Checkpoints < 0 || w.Tails < 0 {
			t.Errorf("writer %+v", w)
		}
		if (w.File == "graph.db" || w.File == "chunks.db" || w.File == "jervis.db") && (w.Transactions == 0 || w.HeldSeconds <= 0) {
			t.Errorf("writer %+v wrote nothing", w)
		}
	}
	if !files["graph.db"] || !files["chunks.db"] || !files["jervis.db"] {
		t.Errorf("writers %+v: not every database", x.Writers)
	}
	// The tasks the documents made: one DATA_PROCESSING each, the
	// trickled notes' too (this corpus has no links).
	if x.TaskDocuments != int64(x.Documents)+5 || x.Tasks["DATA_PROCESSING"] != x.TaskDocuments || len(x.Tasks) != 1 {
		t.Errorf("tasks %v of %d documents", x.Tasks, x.TaskDocuments)
	}
	if x.VectorRecall != 1 { // a small index: every vector search exact
		t.Errorf("vector recall %v", x.VectorRecall)
	}
	// Each search's stages are there, each no longer than the searches.
	for _, name := range []string{"embed", "retrieve", "feedback", "expand"} {
		st, ok := x.Search1.Stages[name]
		if !ok || st.N != x.Search1.N || st.P99 > x.Search1.P99 {
			t.Errorf("search stage %s: %+v of %+v", name, st, x.Search1)
		}
	}
	code, out, errOut = runCLI(t, nil, "bench", "--trickle", "0", "--corpus", jira)
	wants := []string{"roofline", "SQLite", "CORPUS", "acme.tar.gz", "of the roofline", "writers held, of the index and qualify time: ", "tasks a document: 1.00 (DATA_PROCESSING 1.00)", "search stages p50 / p99 ms (1 client): embed", "vector side: 1.000 of an exact scan's best 80"}
	if runtime.GOOS == "linux" {
		wants = append(wants, "I/O per 1,000 documents (store, index, qualify): written")
	}
	for _, want := range wants {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("table lacks %q (exit %d):\n%s\n%s", want, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, nil, "bench", "--trickle", "-1", "--corpus", jira); code == 0 || !strings.Contains(errOut, "--trickle") {
		t.Errorf("bad --trickle: exit %d %q", code, errOut)
	}
}

// --synthetic N runs a generated company of N documents, alone or beside
// a corpus; --backend picks the chunk store and refuses what it cannot
// use.
func TestBenchSyntheticAndBackend(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "bench", "--json", "--trickle", "2", "--synthetic", "120", "--backend", "sqlite")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err, out)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("runs %+v", rep.Runs)
	}
	x := rep.Runs[0]
	if x.Corpus != "synthetic:120" || x.Documents != 120 || x.Chunks < 120 || x.ChunkStore != "sqlite (embedded, vector lists from 100000 chunks)" || x.Freshness.N != 2 {
		t.Errorf("run %+v", x)
	}
	// The synthetic company's issues and mails have links: their tasks
	// beside one DATA_PROCESSING a document.
	if x.TaskDocuments != 122 || x.Tasks["DATA_PROCESSING"] != 122 || x.Tasks["LINK_PROCESSING"] == 0 {
		t.Errorf("tasks %v of %d documents", x.Tasks, x.TaskDocuments)
	}
	// rag.sqlite.vector_lists (100,000 unless set, above) reaches the
	// measured chunk store, which the report names (30 documents are far
	// under it: every search exact), and 0 (never) names none.
	for _, tc := range []struct{ lists, want string }{
		{"10000", "sqlite (embedded, vector lists from 10000 chunks)"},
		{"0", "sqlite (embedded)"},
	} {
		code, out, errOut = runCLI(t, []string{"JERVIS_RAG_SQLITE_VECTOR_LISTS=" + tc.lists}, "bench", "--json", "--trickle", "0", "--synthetic", "30")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		rep = BenchReport{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Runs) != 1 {
			t.Fatal(err, out)
		}
		if x := rep.Runs[0]; x.ChunkStore != tc.want || x.VectorRecall != 1 {
			t.Errorf("vector lists %s: chunk store %q, vector recall %v", tc.lists, x.ChunkStore, x.VectorRecall)
		}
	}
	if code, _, errOut := runCLI(t, []string{"JERVIS_RAG_SQLITE_VECTOR_LISTS=500"}, "bench", "--synthetic", "10"); code == 0 || !strings.Contains(errOut, "rag.sqlite.vector_lists") {
		t.Errorf("vector lists of 500: exit %d %q", code, errOut)
	}
	for _, tc := range []struct{ args, want string }{
		{"--synthetic 0", "--synthetic"},
		{"--backend mongo --synthetic 10", "--backend"},
		{"--backend weaviate --synthetic 10", "rag.weaviate.url"},
	} {
		args := append([]string{"bench"}, strings.Fields(tc.args)...)
		if code, _, errOut := runCLI(t, nil, args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d %q", tc.args, code, errOut)
		}
	}
}

// --keep keeps each corpus's data directory; --searches measures the
// searches over one of them again, without the pipeline, and refuses what
// is not one.
func TestBenchKeepsAndSearchesAgain(t *testing.T) {
	t.Parallel()
	jira, _, _ := evalCorpus(t)
	keep := filepath.Join(t.TempDir(), "kept")
	code, out, errOut := runCLI(t, nil, "bench", "--json", "--trickle", "0", "--corpus", jira, "--synthetic", "60", "--keep", keep)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var built BenchReport
	if err := json.Unmarshal([]byte(out), &built); err != nil || len(built.Runs) != 2 {
		t.Fatal(err, out)
	}
	for i, run := range built.Runs {
		dir := filepath.Join(keep, strconv.Itoa(i+1))
		code, out, errOut := runCLI(t, nil, "bench", "--json", "--searches", dir)
		if code != 0 {
			t.Fatalf("--searches %s: exit %d\n%s\n%s", dir, code, out, errOut)
		}
		var again BenchReport
		if err := json.Unmarshal([]byte(out), &again); err != nil || len(again.Runs) != 1 {
			t.Fatal(err, out)
		}
		x := again.Runs[0]
		if x.Corpus != "kept:"+dir || x.Documents != run.Documents || x.Chunks != run.Chunks || x.DocsPerSecond != 0 ||
			x.Search1.N != run.Search1.N || x.Search16.N*searchPasses != 16*x.Search1.N || x.Search1.P50 <= 0 {
			t.Errorf("--searches %s: %+v, built %+v", dir, x, run)
		}
		if again.Roofline != (Roofline{}) {
			t.Errorf("--searches measured a roofline: %+v", again.Roofline)
		}
	}
	code, out, _ = runCLI(t, nil, "bench", "--searches", filepath.Join(keep, "1"))
	if code != 0 || !strings.Contains(out, "kept:") || strings.Contains(out, "roofline") {
		t.Errorf("--searches table (exit %d):\n%s", code, out)
	}
	for _, tc := range []struct{ args, want string }{
		{"--keep " + keep + " --corpus " + jira, "not empty"},
		{"--searches " + t.TempDir(), "not a data directory"},
		{"--searches " + keep + "/1 --corpus " + jira, "no --corpus"},
		{"--searches " + keep + "/1 --backend weaviate", "weaviate"},
	} {
		if code, _, errOut := runCLI(t, nil, append([]string{"bench"}, strings.Fields(tc.args)...)...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench %s: exit %d %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}
