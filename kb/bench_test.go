package kb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/benchcorpus"
)

// synth is the benchmarks' corpus writer: GloVe's 30,000 most frequent
// words with the search test corpus's words mixed in.
func newSynth(t testing.TB) *benchcorpus.Synth {
	var topical []string
	for _, d := range readJSON[[]corpusDoc](t, "testdata/search/corpus.json") {
		topical = append(topical, d.Content)
	}
	return benchcorpus.New(embedder().Vocabulary(30_000), topical)
}

// BenchmarkIngest reports documents/s and chunks/s for 5-paragraph documents.
func BenchmarkIngest(b *testing.B) {
	e := newEnv(b)
	s := newSynth(b)
	reqs := make([]kb.IngestRequest, b.N)
	for i := range reqs {
		reqs[i] = s.Doc("bench", i, 5)
	}
	b.ResetTimer()
	chunks := 0
	for i := range b.N {
		res, err := e.kb.Ingest(context.Background(), reqs[i])
		if err != nil {
			b.Fatal(err)
		}
		chunks += len(res.Chunks)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(chunks)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkSearch reports hybrid search latency (p50, p99, in ms) with
// graph expansion of depth 2, at 10,000 and 100,000 chunks, and the heap in
// use once the vectors are loaded. Building 100,000 chunks takes about a
// minute; with JERVIS_BENCH_DIR set, corpora are kept there and reused.
// JERVIS_BENCH_CHUNKS adds a size (e.g. 600000: the chunks of `jervis
// bench --synthetic 100000`).
func BenchmarkSearch(top *testing.B) {
	queries := readJSON[[]corpusQuery](top, "testdata/search/queries.json")
	sizes := []int{10_000, 100_000}
	if n, err := strconv.Atoi(os.Getenv("JERVIS_BENCH_CHUNKS")); err == nil && n > 0 {
		sizes = append(sizes, n)
	}
	for _, size := range sizes {
		var e env // built once per size, whatever b.N the runner tries
		top.Run(fmt.Sprintf("chunks=%d", size), func(b *testing.B) {
			ctx := context.Background()
			start := time.Now()
			if e.kb == nil {
				dir := top.TempDir()
				if cache := os.Getenv("JERVIS_BENCH_DIR"); cache != "" {
					dir = filepath.Join(cache, fmt.Sprint(size))
				}
				e = newEnvAt(top, dir)
				s := newSynth(b)
				have, _ := e.chunks.For("bench").Count(ctx)
				if err := benchcorpus.Fill(ctx, e.kb, s, "bench", have, size); err != nil {
					b.Fatal(err)
				}
			}
			n, _ := e.chunks.For("bench").Count(ctx)
			if _, err := e.kb.Search(ctx, kb.SearchRequest{Client: "bench", Query: "warm up"}); err != nil { // loads the vectors
				b.Fatal(err)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.Logf("%d chunks ingested in %s; heap in use %.0f MB", n, time.Since(start).Round(time.Second), float64(ms.HeapInuse)/(1<<20))
			lat := make([]time.Duration, 0, b.N)
			type slow struct {
				d      time.Duration
				i      int
				q      string
				timing map[string]float64
			}
			var slowest []slow
			b.ResetTimer()
			for i := range b.N {
				q := queries[i%len(queries)].Query
				t0 := time.Now()
				pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "bench", Query: q, Expand: ptr(2)})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				slowest = append(slowest, slow{lat[len(lat)-1], i, q, pack.Timings})
				if i == 0 {
					b.Logf("%q: %s", q, pack.Summary)
				}
			}
			b.StopTimer()
			slices.SortFunc(slowest, func(a, b slow) int { return int(b.d - a.d) })
			if os.Getenv("JERVIS_BENCH_SLOWEST") != "" {
				for _, s := range slowest[:min(8, len(slowest))] {
					b.Logf("slow: %s #%d %q %v", s.d.Round(100*time.Microsecond), s.i, s.q, s.timing)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
		})
	}
}
