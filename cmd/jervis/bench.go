package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/synthcorpus"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/eval"
	"github.com/jervis-dev/jervis/kb/rag"
	ragsqlite "github.com/jervis-dev/jervis/kb/rag/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/importer"
)

// BenchRun is what jervis bench measured on one corpus.
type BenchRun struct {
	Corpus string `json:"corpus"`
	// ChunkStore is where the chunks went: the embedded store or Weaviate.
	ChunkStore string `json:"chunkStore"`
	Documents  int    `json:"documents"`
	Chunks     int    `json:"chunks"`
	// Wall-clock seconds: store (the import), then index and qualify (run
	// together, as in serve), and all of it.
	StoreSeconds   float64 `json:"storeSeconds"`
	IndexSeconds   float64 `json:"indexSeconds"`
	QualifySeconds float64 `json:"qualifySeconds"`
	Seconds        float64 `json:"seconds"`
	DocsPerSecond  float64 `json:"documentsPerSecond"`
	// CPU-seconds (user + system, the whole process) per 1,000 documents.
	StoreCPUPer1000    float64 `json:"storeCpuSecondsPer1000"`
	PipelineCPUPer1000 float64 `json:"pipelineCpuSecondsPer1000"`
	// Freshness: documents trickled in while the bulk is indexed and
	// qualified, from stored NEW to the first search that returns them.
	Freshness Latency `json:"freshness"`
	// Search at the corpus's size: default hybrid search, depth-2
	// expansion, one client, then 16 at once.
	Search1  Latency `json:"search1"`
	Search16 Latency `json:"search16"`
	// VectorRecall: of the best chunks of an exact scan of every vector,
	// the share the vector side of search finds (the embedded index's
	// lists, ivf.go, when on, search a part of them), by the same
	// queries; absent where the chunk store has no exact scan.
	VectorRecall float64 `json:"vectorRecall,omitempty"`
	// Memory and disk.
	PeakRSSBytes     int64   `json:"peakRssBytes"`
	HeapBytes        uint64  `json:"heapBytes"`
	DiskBytesPer1000 float64 `json:"diskBytesPer1000"`
	// IOPer1000 is the I/O calls from the stores' opening until the queue
	// is drained (the import, index and qualify; with --trickle also the
	// live documents and the searches for them), per 1,000 documents;
	// absent where the platform does not count them (Linux's
	// /proc/self/io).
	IOPer1000 *IOCalls `json:"ioPer1000,omitempty"`
	// Writers: each embedded database's writer while the bulk was indexed
	// and qualified, most held first. SQLite writes one transaction at a
	// time: a writer held nearly all the time bounds the pipeline, whatever
	// the CPU left idle.
	Writers []WriterFigures `json:"writers,omitempty"`
	// Tasks: the tasks the corpus's documents made, by kind. Each is a row
	// inserted, claimed and finished, with its TaskMemory and four events:
	// on the dev Jira corpus two thirds are LINK_PROCESSING, and the
	// pipeline without them ran 55–65 % faster (BENCHMARKS.md,
	// twenty-eighth round).
	Tasks map[string]int64 `json:"tasks,omitempty"`
	// TaskDocuments: the documents that made them (the corpus's and the
	// trickled ones).
	TaskDocuments int64 `json:"taskDocuments,omitempty"`
}

// WriterFigures is one database's writer use over the index and qualify
// stages.
type WriterFigures struct {
	File         string  `json:"file"`
	Transactions int64   `json:"transactions"`
	HeldSeconds  float64 `json:"heldSeconds"`
	// HeldShare is HeldSeconds over the stages' wall-clock time.
	HeldShare float64 `json:"heldShare"`
	// WaitedSeconds is how long writers waited for it, summed over the
	// writers (several wait at once).
	WaitedSeconds float64 `json:"waitedSeconds"`
	// Checkpoints are the WAL's copies into the file by the database's
	// checkpointer, off the writer's turn; Tails what the writer copied in
	// its turn after them (sqlitedb.WriterUse).
	Checkpoints int64 `json:"checkpoints"`
	Tails       int64 `json:"tails"`
}

// writersUse returns the writer use, so far, of the databases open under
// dir, by file name.
func writersUse(dir string) map[string]sqlitedb.WriterUse {
	out := map[string]sqlitedb.WriterUse{}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // as the databases hold their paths
	}
	for _, u := range sqlitedb.Writers() {
		if rel, err := filepath.Rel(dir, u.Path); err == nil && filepath.IsLocal(rel) {
			out[rel] = u
		}
	}
	return out
}

// writerFigures is each database's writer use between before and after,
// over wall.
func writerFigures(before, after map[string]sqlitedb.WriterUse, wall time.Duration) []WriterFigures {
	var out []WriterFigures
	for file, a := range after {
		b := before[file]
		f := WriterFigures{File: file, Transactions: a.Transactions - b.Transactions,
			HeldSeconds: (a.Held - b.Held).Seconds(), WaitedSeconds: (a.Waited - b.Waited).Seconds(),
			Checkpoints: a.Copies - b.Copies, Tails: a.Tails - b.Tails}
		if wall > 0 {
			f.HeldShare = f.HeldSeconds / wall.Seconds()
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b WriterFigures) int {
		return cmp.Or(cmp.Compare(b.HeldSeconds, a.HeldSeconds), strings.Compare(a.File, b.File))
	})
	return out
}

// IOCalls counts the bytes passed to a process's read and write calls and
// the calls: files (the databases, their write-ahead logs), pipes and
// sockets alike, whether the disk or the page cache served them. Written
// bytes over the bytes the data ends on is what each page was written
// again and again (WAL frames, then the checkpoint's copy).
type IOCalls struct {
	ReadBytes    float64 `json:"readBytes"`
	WrittenBytes float64 `json:"writtenBytes"`
	ReadCalls    float64 `json:"readCalls"`
	WriteCalls   float64 `json:"writeCalls"`
}

// per1000 is the calls between c0 and c per 1,000 of n documents.
func (c IOCalls) per1000(c0 IOCalls, n int) *IOCalls {
	return &IOCalls{ReadBytes: per1000(c.ReadBytes-c0.ReadBytes, n), WrittenBytes: per1000(c.WrittenBytes-c0.WrittenBytes, n),
		ReadCalls: per1000(c.ReadCalls-c0.ReadCalls, n), WriteCalls: per1000(c.WriteCalls-c0.WriteCalls, n)}
}

// Latency is a distribution of durations, in milliseconds.
type Latency struct {
	N         int     `json:"n"`
	Missed    int     `json:"missed,omitempty"` // never seen within the time allowed
	P50       float64 `json:"p50Ms"`
	P99       float64 `json:"p99Ms"`
	PerSecond float64 `json:"perSecond,omitempty"`
	// Stages: a search's parts (embed, retrieve, feedback, expand,
	// evidence), each its own distribution: what the total is made of.
	Stages map[string]Latency `json:"stages,omitempty"`
}

// Roofline is what this machine does with the same pieces, raw, in the
// same run: every pipeline figure is read against it.
type Roofline struct {
	SQLiteTxPerSecond   float64 `json:"sqliteTransactionsPerSecond"` // one small insert each
	SQLiteRowsPerSecond float64 `json:"sqliteRowsPerSecond"`         // many inserts in one transaction
	EmbedPerSecond      float64 `json:"embeddingsPerSecond"`         // chunk-sized texts, the configured embedder
	VectorScanPerSecond float64 `json:"vectorScanPerSecond"`         // float32 dot products of its dimension
	EmbeddingDimensions int     `json:"embeddingDimensions"`
}

// BenchReport is jervis bench's answer.
type BenchReport struct {
	Machine  string     `json:"machine"`
	Roofline Roofline   `json:"roofline"`
	Runs     []BenchRun `json:"runs"`
}

func (a *app) benchCommand() *cobra.Command {
	var (
		asJSON    bool
		corpora   []string
		synthetic []int
		trickle   int
		backend   string
		keep      string
		searches  string
	)
	cmd := &cobra.Command{
		Use:   "bench [--json] [--corpus PATH[,PATH...]]... [--synthetic N]... [--backend sqlite|weaviate] [--trickle N] [--keep DIR | --searches DIR]",
		Short: "Measure the whole pipeline on real corpora: documents/s per stage, freshness, search latency, memory, beside this machine's raw rates",
		Long: `bench runs the whole pipeline in this process (the configured chunk store — embedded,
or Weaviate with rag.backend weaviate —, the embedded pipeline store and graph, the rules
qualifier) on each corpus in a fresh data directory, and reports:

  documents/s    end to end, and the wall-clock seconds of store (the import), index and
                 qualify (the last two run together, as in serve); CPU-seconds per 1,000
                 documents
  freshness      --trickle documents (default 40) written one every 100 ms while the bulk is
                 indexed and qualified: from stored NEW to the first search that returns it
  search         the default search (hybrid, depth-2 expansion) at the corpus's size, by the
                 titles of 200 of its documents: 1 client (the 200 five times over), then 16
                 at once (each the 200)
  memory, disk   peak RSS, heap after the run, bytes on disk per 1,000 documents
  I/O            bytes and calls read and written by the store, index and qualify per 1,000
                 documents (Linux), and the bytes written over the disk the data ends on
  roofline       measured in the same run: SQLite transactions/s and rows/s on this disk, the
                 embedder's texts/s, float32 vector scan rate

--corpus takes a comma-separated list of paths imported together as one corpus (repeat
it for several); --synthetic N generates a deterministic synthetic company of N documents
(mail threads, Jira issues with comments and links, wiki pages; the same people
throughout; one line to 60,000 characters) and runs it as one more corpus. Without
either, the dev corpora in ../shared/corpus when present (the Jira project, the mailing
list). --backend picks the chunk store (default: rag.backend from the configuration;
weaviate needs rag.weaviate.url, e.g. JERVIS_RAG_WEAVIATE_URL).

--keep DIR keeps each corpus's data directory (DIR/1, DIR/2, … in the order run; DIR
new or empty); --searches DIR then measures only the searches over one kept directory
(embedded chunk store: the index loaded, a warm pass of the 200 queries, then 1 client
five times over and 16), so that search code can be compared at 100,000 documents
without building them again.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if searches != "" {
				if len(corpora) > 0 || len(synthetic) > 0 || keep != "" {
					return errors.New("--searches measures a kept data directory: no --corpus, --synthetic or --keep with it")
				}
				if backend == "weaviate" || backend == "" && a.cfg.RAG.Backend == "weaviate" {
					return errors.New("--searches reads the embedded chunk store of the kept directory: not with the weaviate backend")
				}
				run, err := a.benchSearches(cmd.Context(), searches)
				if err != nil {
					return fmt.Errorf("bench --searches %s: %w", searches, err)
				}
				rep := BenchReport{Machine: machine(), Runs: []BenchRun{run}}
				if asJSON {
					return a.printJSON(rep)
				}
				return rep.print(a.stdout)
			}
			if err := refuseNonEmpty(keep); err != nil { // "": none
				return err
			}
			if len(corpora) == 0 && len(synthetic) == 0 {
				corpora = defaultBenchCorpora()
			}
			for _, n := range synthetic {
				if n < 1 || n > 10_000_000 {
					return fmt.Errorf("--synthetic %d is not 1..10000000", n)
				}
				corpora = append(corpora, syntheticCorpus+strconv.Itoa(n))
			}
			if len(corpora) == 0 {
				return errors.New("no corpus: give --corpus PATH or --synthetic N (the dev corpora are not in ../shared/corpus)")
			}
			if trickle < 0 || trickle > 10_000 {
				return fmt.Errorf("--trickle %d is not 0..10000", trickle)
			}
			switch backend {
			case "":
			case "sqlite", "weaviate":
				a.cfg.RAG.Backend = backend
			default:
				return fmt.Errorf("--backend %q is not sqlite or weaviate", backend)
			}
			if a.cfg.RAG.Backend == "weaviate" && a.cfg.RAG.Weaviate.URL == "" {
				return errors.New("--backend weaviate: rag.weaviate.url is not set (the configuration, or JERVIS_RAG_WEAVIATE_URL)")
			}
			ctx := cmd.Context()
			rep := BenchReport{Machine: machine()}
			for i, c := range corpora {
				dir := ""
				if keep != "" {
					dir = filepath.Join(keep, strconv.Itoa(i+1))
				}
				run, err := a.benchOne(ctx, strings.Split(c, ","), trickle, dir)
				if err != nil {
					return fmt.Errorf("bench %s: %w", c, err)
				}
				rep.Runs = append(rep.Runs, run)
			}
			a.logf("bench: the roofline")
			var err error
			if rep.Roofline, err = a.roofline(ctx, rep.Runs); err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(rep)
			}
			return rep.print(a.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringArrayVar(&corpora, "corpus", nil, "paths imported together as one corpus, comma-separated (repeat for several)")
	f.IntSliceVar(&synthetic, "synthetic", nil, "also run a synthetic corpus of N documents (repeat for several sizes)")
	f.StringVar(&backend, "backend", "", "chunk store: sqlite or weaviate (default: rag.backend)")
	f.IntVar(&trickle, "trickle", 40, "documents trickled in during the bulk to measure freshness (0: none)")
	f.StringVar(&keep, "keep", "", "keep each corpus's data directory in DIR/1, DIR/2, … (DIR new or empty)")
	f.StringVar(&searches, "searches", "", "measure only the searches over a data directory kept by --keep (e.g. DIR/1)")
	return cmd
}

// defaultBenchCorpora are the dev corpora present in ../shared/corpus.
func defaultBenchCorpora() []string {
	dir := filepath.Join("..", "shared", "corpus")
	var out []string
	for _, f := range []string{"jira-timob-20000-28999.tar.gz", "openbmc-3000.mbox.gz"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			out = append(out, filepath.Join(dir, f))
		}
	}
	return out
}

// machine describes this machine in a line.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d)", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0))
}

const benchClient = "bench"

// syntheticCorpus prefixes the name of a --synthetic corpus ("synthetic:N").
const syntheticCorpus = "synthetic:"

// benchOne runs the pipeline over one corpus in a fresh directory: keep
// when not empty (and kept), else a temporary one.
func (a *app) benchOne(ctx context.Context, paths []string, trickle int, keep string) (BenchRun, error) {
	run := BenchRun{Corpus: strings.Join(paths, ",")}
	dir, done, err := freshDir(keep, "jervis-bench-")
	if err != nil {
		return run, err
	}
	defer done()
	if keep != "" {
		a.logf("bench: keeping the data directory %s", dir)
	}
	if n, ok := strings.CutPrefix(run.Corpus, syntheticCorpus); ok && len(paths) == 1 {
		docs, _ := strconv.Atoi(n)
		src := filepath.Join(dir, "synthetic")
		a.logf("bench: writing %d synthetic documents", docs)
		c, err := synthcorpus.Write(src, docs)
		if err != nil {
			return run, fmt.Errorf("synthetic corpus: %w", err)
		}
		a.logf("bench: %d messages, %d issues, %d pages in %d files, %.1f MiB", c.Messages, c.Issues, c.Pages, c.Files, float64(c.Bytes)/(1<<20))
		paths = []string{src}
	}
	calls0, ioOK := ioCalls()
	all, chunkStore, err := a.openMeasured(ctx, dir, benchClient)
	if err != nil {
		return run, err
	}
	defer all.Close()
	run.ChunkStore = chunkStore

	a.logf("bench: importing %s", run.Corpus)
	start, cpu0 := time.Now(), cpuSeconds()
	im := &importer.Importer{Store: all.Store, Kinds: a.kinds, Client: benchClient, Connection: "bench", DataDir: dir}
	sum, err := a.importWith(ctx, all.Store, im, paths, false)
	if err != nil {
		return run, err
	}
	run.Documents = sum.Documents
	run.StoreSeconds, run.StoreCPUPer1000 = time.Since(start).Seconds(), per1000(cpuSeconds()-cpu0, run.Documents)

	// The bulk is indexed and qualified while documents trickle in and a
	// searcher looks for each.
	fresh := &freshness{}
	waking := &store.Waking{Store: all.Store}
	trickleCtx, stopTrickle := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if trickle > 0 {
		wg.Go(func() {
			fresh.trickle(trickleCtx, pollers.Ingester{Store: waking, Kinds: a.kinds, Priority: store.PriorityLive}, trickle)
		})
		wg.Go(func() { fresh.search(trickleCtx, all.KB.KB) })
	}
	cpuDrain, drainStart, writers0 := cpuSeconds(), time.Now(), writersUse(dir)
	indexed, qualified, err := a.drainWhile(ctx, waking, all.KB, func() bool { return trickle == 0 || fresh.done() })
	stopTrickle()
	wg.Wait()
	if err != nil {
		return run, err
	}
	run.IndexSeconds, run.QualifySeconds = indexed.Seconds(), qualified.Seconds()
	run.PipelineCPUPer1000 = per1000(cpuSeconds()-cpuDrain, run.Documents)
	run.Writers = writerFigures(writers0, writersUse(dir), time.Since(drainStart))
	if calls, ok := ioCalls(); ok && ioOK {
		run.IOPer1000 = calls.per1000(calls0, run.Documents)
	}
	run.Seconds = time.Since(start).Seconds()
	if run.Seconds > 0 {
		run.DocsPerSecond = float64(run.Documents) / run.Seconds
	}
	run.Freshness = fresh.latency(trickle)
	if run.Tasks, run.TaskDocuments, err = tasksByKind(ctx, all.Store, benchClient); err != nil {
		return run, err
	}
	if run.Chunks, err = all.Chunks.For(benchClient).Count(ctx); err != nil {
		return run, err
	}

	if err := a.measureSearches(ctx, all, &run, false); err != nil {
		return run, err
	}
	run.DiskBytesPer1000 = per1000(float64(eval.DiskBytes(dir)), run.Documents)
	if err := a.writeHeapProfile(); err != nil { // what this corpus holds, its stores still open
		return run, err
	}
	return run, nil
}

// tasksByKind counts client's tasks by kind and its documents, whatever
// their state.
func tasksByKind(ctx context.Context, st store.Store, client string) (map[string]int64, int64, error) {
	stats, err := st.Stats(ctx)
	if err != nil {
		return nil, 0, err
	}
	tasks, docs := map[string]int64{}, int64(0)
	for _, g := range stats.Groups {
		switch {
		case g.Client != client:
		case g.Tasks:
			tasks[g.Kind] += g.N
		default:
			docs += g.N
		}
	}
	return tasks, docs, nil
}

// benchSearches measures the searches over a data directory a bench run
// kept: the pipeline is not run.
func (a *app) benchSearches(ctx context.Context, dir string) (BenchRun, error) {
	run := BenchRun{Corpus: "kept:" + dir}
	if _, err := os.Stat(filepath.Join(dir, "chunks.db")); err != nil {
		return run, fmt.Errorf("not a data directory kept by bench --keep: %w", err)
	}
	all, chunkStore, err := a.openMeasured(ctx, dir, benchClient)
	if err != nil {
		return run, err
	}
	defer all.Close()
	run.ChunkStore = chunkStore
	st, err := all.Store.Stats(ctx)
	if err != nil {
		return run, err
	}
	for _, n := range st.DocumentsByClient[benchClient] {
		run.Documents += int(n)
	}
	if run.Chunks, err = all.Chunks.For(benchClient).Count(ctx); err != nil {
		return run, err
	}
	if err := a.measureSearches(ctx, all, &run, true); err != nil {
		return run, err
	}
	run.DiskBytesPer1000 = per1000(float64(eval.DiskBytes(dir)), run.Documents)
	return run, a.writeHeapProfile()
}

// searchPasses is how many times one client runs the queries: a p99 over
// 200 searches is their second slowest, which one pause of the VM sets;
// over 1,000 it is the tenth (16 clients make 3,200 already).
const searchPasses = 5

// measureSearches runs the default search by the titles of 200 of the
// client's documents from 1 client (searchPasses times over), then 16
// (after a pass not measured, when warm), and reads the memory after.
func (a *app) measureSearches(ctx context.Context, all *embedded.All, run *BenchRun, warm bool) error {
	a.logf("bench: searching %d chunks", run.Chunks)
	queries, err := benchQueries(ctx, all.Store, 200)
	if err != nil {
		return err
	}
	if warm {
		if _, err := searchLatency(ctx, all.KB.KB, queries, 1); err != nil {
			return err
		}
	}
	if c, ok := all.KB.Chunks.(*ragsqlite.Store); ok {
		// The in-memory index loaded, as serve preloads it: a process
		// that searched nothing while it wrote (--trickle 0) has it still
		// to load, and the first search loaded it (seconds at 100,000
		// documents) while the others measured its lists' training.
		if err := c.Preload(ctx, nil); err != nil {
			return err
		}
		c.Settle() // the vector lists as they will be, not an exact scan while they are trained
	}
	if run.Search1, err = searchLatency(ctx, all.KB.KB, slices.Repeat(queries, searchPasses), 1); err != nil {
		return err
	}
	if run.Search16, err = searchLatency(ctx, all.KB.KB, queries, 16); err != nil {
		return err
	}
	if recall, ok, err := all.KB.KB.VectorRecall(ctx, benchClient, queries, kb.VectorCandidates()); err != nil {
		return err
	} else if ok {
		run.VectorRecall = recall
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	run.PeakRSSBytes, run.HeapBytes = peakRSS(), mem.HeapAlloc
	return nil
}

func per1000(v float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return v * 1000 / float64(n)
}

// freshness trickles documents in and times until search returns each.
type freshness struct {
	mu     sync.Mutex
	stored map[string]freshDoc // by source URN, as search items name them
	seen   int
	ended  time.Time // when trickling stopped, all written or not
}

// freshWait is how long a trickled document may take to be found once the
// trickling ended; past it, it counts as never seen.
const freshWait = 30 * time.Second

type freshDoc struct {
	word string    // the word only it holds
	at   time.Time // stored
	took time.Duration
	seen bool
}

// trickle stores n notes, one every 100 ms, through the one ingest path.
func (f *freshness) trickle(ctx context.Context, in pollers.Ingester, n int) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		f.mu.Lock()
		f.ended = time.Now()
		f.mu.Unlock()
	}()
	for i := range n {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		word := fmt.Sprintf("zqfresh%dx", i)
		body := fmt.Sprintf("# Release note %d\n\nThe build %s shipped to the staging ring; watch the error budget.\n", i, word)
		at := time.Now()
		receipts, err := in.File(ctx, benchClient, "bench-trickle", fmt.Sprintf("fresh-%d.md", i), strings.NewReader(body), nil)
		if err != nil || len(receipts) != 1 {
			return
		}
		r := receipts[0]
		f.mu.Lock()
		if f.stored == nil {
			f.stored = map[string]freshDoc{}
		}
		f.stored[string(r.SourceType)+":"+r.ExternalID] = freshDoc{word: word, at: at}
		f.mu.Unlock()
	}
}

// search looks for the stored, unseen trickled documents every 20 ms, in
// one keyword query for all of them (as few searches as a user's would be:
// one per pending document cost the pipeline it measures a core).
func (f *freshness) search(ctx context.Context, k *kb.KB) {
	zero, none := 0.0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		f.mu.Lock()
		var words []string
		for _, d := range f.stored {
			if !d.seen && len(words) < rag.MaxQueryTerms {
				words = append(words, d.word)
			}
		}
		f.mu.Unlock()
		if len(words) == 0 {
			continue
		}
		pack, err := k.Search(ctx, kb.SearchRequest{Client: benchClient, Query: strings.Join(words, " "), Alpha: &zero, Expand: &none,
			Limit: len(words)})
		if err != nil {
			continue
		}
		now := time.Now()
		f.mu.Lock()
		for _, it := range pack.Items {
			if d, ok := f.stored[it.SourceURN]; ok && !d.seen {
				d.seen, d.took = true, now.Sub(d.at)
				f.stored[it.SourceURN] = d
				f.seen++
			}
		}
		f.mu.Unlock()
	}
}

// done says whether the trickling ended and every document written was
// seen, or freshWait passed since.
func (f *freshness) done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.ended.IsZero() && (f.seen == len(f.stored) || time.Since(f.ended) > freshWait)
}

func (f *freshness) latency(n int) Latency {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []time.Duration
	for _, d := range f.stored {
		if d.seen {
			ds = append(ds, d.took)
		}
	}
	l := latencyOf(ds, 0)
	l.Missed = n - len(ds)
	return l
}

func latencyOf(ds []time.Duration, wall time.Duration) Latency {
	l := Latency{N: len(ds)}
	if len(ds) == 0 {
		return l
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := min(len(ds)-1, int(math.Ceil(q*float64(len(ds))))-1)
		return float64(ds[max(0, i)].Microseconds()) / 1000
	}
	l.P50, l.P99 = at(0.50), at(0.99)
	if wall > 0 {
		l.PerSecond = float64(len(ds)) / wall.Seconds()
	}
	return l
}

// stagesLine lists the stages' p50 / p99 in a search's order.
func (l Latency) stagesLine() string {
	var parts []string
	for _, name := range []string{"embed", "retrieve", "feedback", "titles", "expand", "evidence"} {
		if s, ok := l.Stages[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f / %.1f", name, s.P50, s.P99))
		}
	}
	return strings.Join(parts, ", ")
}

// benchQueries are the titles of up to n documents.
func benchQueries(ctx context.Context, st store.Store, n int) ([]string, error) {
	docs, err := st.ListDocuments(ctx, store.DocumentQuery{Client: benchClient, Limit: n})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range docs {
		if t := strings.TrimSpace(d.Normalized.Title); t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

// searchLatency runs the queries with clients searching at once, each
// client the whole list.
func searchLatency(ctx context.Context, k *kb.KB, queries []string, clients int) (Latency, error) {
	if len(queries) == 0 {
		return Latency{}, nil
	}
	var mu sync.Mutex
	var all []time.Duration
	stages := map[string][]time.Duration{}
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var ds []time.Duration
			for i := range queries {
				q := queries[(i+c*7)%len(queries)]
				t := time.Now()
				pack, err := k.Search(ctx, kb.SearchRequest{Client: benchClient, Query: q})
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				ds = append(ds, time.Since(t))
				mu.Lock()
				for name, ms := range pack.Timings {
					if name != "total" {
						stages[name] = append(stages[name], time.Duration(ms*float64(time.Millisecond)))
					}
				}
				mu.Unlock()
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		})
	}
	wg.Wait()
	l := latencyOf(all, time.Since(start))
	if len(stages) > 0 {
		l.Stages = map[string]Latency{}
		for name, ds := range stages {
			l.Stages[name] = latencyOf(ds, 0)
		}
	}
	return l, firstErr
}

// roofline measures the raw rates of this machine's pieces: SQLite on the
// data directory's disk, the configured embedder, a float32 vector scan.
func (a *app) roofline(ctx context.Context, runs []BenchRun) (Roofline, error) {
	var r Roofline
	dir, err := os.MkdirTemp("", "jervis-roofline-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: filepath.Join(dir, "raw.db"), Migrations: []string{`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`}})
	if err != nil {
		return r, err
	}
	defer db.Close()
	const txs, rows = 2000, 100_000
	row := strings.Repeat("x", 200)
	start := time.Now()
	for i := range txs {
		if err := db.Write(ctx, "raw", func(tx sqlitedb.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, i, row)
			return err
		}); err != nil {
			return r, err
		}
	}
	r.SQLiteTxPerSecond = txs / time.Since(start).Seconds()
	start = time.Now()
	if err := db.Write(ctx, "raw", func(tx sqlitedb.Tx) error {
		for i := range rows {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, txs+i, row); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return r, err
	}
	r.SQLiteRowsPerSecond = rows / time.Since(start).Seconds()

	k, err := embedded.OpenKB(ctx, dir, nil)
	if err != nil {
		return r, err
	}
	defer k.Close()
	texts := make([]string, 2000)
	for i := range texts { // about a chunk: 256 tokens of prose
		texts[i] = strings.Repeat(fmt.Sprintf("The release %d of the checkout service failed its canary because the session cache kept stale tokens. ", i), 12)
	}
	start = time.Now()
	var vecs [][]float32
	for lo := 0; lo < len(texts); lo += 32 {
		vs, err := k.Embedder.Embed(ctx, texts[lo:min(len(texts), lo+32)])
		if err != nil {
			return r, err
		}
		vecs = append(vecs, vs...)
	}
	r.EmbedPerSecond = float64(len(texts)) / time.Since(start).Seconds()
	if len(vecs) > 0 {
		dim := len(vecs[0])
		r.EmbeddingDimensions = dim
		const n = 100_000
		flat := make([]float32, n*dim)
		for i := range flat {
			flat[i] = float32(i%97) / 97
		}
		q := vecs[0]
		start = time.Now()
		var sink float32
		const passes = 5
		for range passes {
			for i := 0; i < n; i++ {
				var s float32
				row := flat[i*dim : (i+1)*dim]
				for j, x := range q {
					s += x * row[j]
				}
				sink += s
			}
		}
		r.VectorScanPerSecond = passes * n / time.Since(start).Seconds()
		_ = sink
	}
	return r, nil
}

func (rep BenchReport) print(w interface{ Write([]byte) (int, error) }) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "machine\t%s\n", rep.Machine)
	r := rep.Roofline
	if len(rep.Runs) > 0 {
		fmt.Fprintf(tw, "chunks\t%s\n", rep.Runs[0].ChunkStore)
	}
	if r != (Roofline{}) { // --searches measures no roofline
		fmt.Fprintf(tw, "roofline\tSQLite %.0f transactions/s, %.0f rows/s in one transaction; embedder %.0f chunk texts/s (%d-d); vector scan %.1f M vectors/s\n",
			r.SQLiteTxPerSecond, r.SQLiteRowsPerSecond, r.EmbedPerSecond, r.EmbeddingDimensions, r.VectorScanPerSecond/1e6)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CORPUS\tDOCS\tCHUNKS\tDOCS/S\tSTORE S\tINDEX S\tQUALIFY S\tCPU S/1K (STORE, PIPELINE)\tFRESH P50/P99 MS\tSEARCH P50/P99 MS (1)\tSEARCH P50/P99 MS, REQ/S (16)\tPEAK RSS MIB\tDISK MIB/1K")
	var notes []string
	for _, x := range rep.Runs {
		chunksPerSec := 0.0
		if x.QualifySeconds > 0 {
			chunksPerSec = float64(x.Chunks) / x.QualifySeconds
		}
		fresh := fmt.Sprintf("%.0f / %.0f", x.Freshness.P50, x.Freshness.P99)
		if x.Freshness.Missed > 0 {
			fresh += fmt.Sprintf(" (%d never)", x.Freshness.Missed)
		}
		name := filepath.Base(x.Corpus)
		if dir, ok := strings.CutPrefix(x.Corpus, "kept:"); ok {
			name = "kept:" + dir
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f, %.1f\t%s\t%.1f / %.1f\t%.1f / %.1f, %.0f\t%d\t%.1f\n",
			name, x.Documents, x.Chunks, x.DocsPerSecond, x.StoreSeconds, x.IndexSeconds, x.QualifySeconds,
			x.StoreCPUPer1000, x.PipelineCPUPer1000, fresh, x.Search1.P50, x.Search1.P99, x.Search16.P50, x.Search16.P99, x.Search16.PerSecond,
			x.PeakRSSBytes>>20, x.DiskBytesPer1000/(1<<20))
		if r.SQLiteRowsPerSecond > 0 && r.EmbedPerSecond > 0 {
			notes = append(notes, fmt.Sprintf("%s of the roofline: chunks written %.0f/s = %.1f %% of SQLite's rows/s, %.1f %% of the embedder's rate",
				name, chunksPerSec, 100*chunksPerSec/r.SQLiteRowsPerSecond, 100*chunksPerSec/r.EmbedPerSecond))
		}
		if c := x.IOPer1000; c != nil && x.DiskBytesPer1000 > 0 {
			notes = append(notes, fmt.Sprintf("%s I/O per 1,000 documents (store, index, qualify): written %.0f MiB in %.0f calls (%.1f times the disk it ends on), read %.0f MiB in %.0f calls",
				name, c.WrittenBytes/(1<<20), c.WriteCalls, c.WrittenBytes/x.DiskBytesPer1000, c.ReadBytes/(1<<20), c.ReadCalls))
		}
		if len(x.Writers) > 0 {
			var ws []string
			for _, f := range x.Writers {
				ws = append(ws, fmt.Sprintf("%s %.0f %% (%d transactions, %.1f s waited; %d checkpoints, %d tails)", f.File, 100*f.HeldShare, f.Transactions, f.WaitedSeconds, f.Checkpoints, f.Tails))
			}
			notes = append(notes, fmt.Sprintf("%s writers held, of the index and qualify time: %s", name, strings.Join(ws, ", ")))
		}
		if x.TaskDocuments > 0 {
			var all int64
			kinds := slices.Sorted(maps.Keys(x.Tasks))
			parts := make([]string, 0, len(kinds))
			for _, k := range kinds {
				all += x.Tasks[k]
				parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(x.Tasks[k])/float64(x.TaskDocuments)))
			}
			notes = append(notes, fmt.Sprintf("%s tasks a document: %.2f (%s)", name, float64(all)/float64(x.TaskDocuments), strings.Join(parts, ", ")))
		}
		if st := x.Search1.stagesLine(); st != "" {
			notes = append(notes, fmt.Sprintf("%s search stages p50 / p99 ms (1 client): %s", name, st))
		}
		if x.VectorRecall > 0 {
			notes = append(notes, fmt.Sprintf("%s vector side: %.3f of an exact scan's best %d found (the same queries)", name, x.VectorRecall, kb.VectorCandidates()))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}
