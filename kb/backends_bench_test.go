package kb_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/benchcorpus"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

// BenchmarkChunkBackends puts the SQLite and Weaviate chunk backends side
// by side on the same synthetic corpus: ingest throughput (kb.Ingest:
// chunking, GloVe, graph and chunk writes, measured over filling the
// corpus) and hybrid search latency (kb.Search with depth-2 expansion).
// The graph stays SQLite in both, so the difference is the chunk store.
// It needs a Weaviate server (TEST_WEAVIATE_URL); JERVIS_BENCH_SIZES
// ("10000,100000" by default) picks the sizes. Run it with a fixed count,
// e.g. -benchtime=300x, so that each corpus is filled once.
func BenchmarkChunkBackends(top *testing.B) {
	u := integration.Env(top, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	queries := readJSON[[]corpusQuery](top, "testdata/search/queries.json")
	sizes := []int{10_000, 100_000}
	if v := os.Getenv("JERVIS_BENCH_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	for _, size := range sizes {
		for _, backend := range []string{"sqlite", "weaviate"} {
			var (
				k       *kb.KB
				ingest  time.Duration
				chunks  int
				classes []string
			)
			top.Run(fmt.Sprintf("chunks=%d/backend=%s", size, backend), func(b *testing.B) {
				if k == nil {
					dir := top.TempDir()
					var bk embedded.Backends
					if backend == "weaviate" {
						class := fmt.Sprintf("JervisBench%d", time.Now().UnixNano()%1e9)
						classes = append(classes, class)
						w, err := weaviate.Open(weaviate.Config{URL: u, Class: class})
						if err != nil {
							b.Fatal(err)
						}
						bk.Chunks = w
					}
					all := embeddedtest.OpenWith(top, dir, bk)
					k = all.KB.KB
					start := time.Now()
					if err := benchcorpus.Fill(ctx, k, newSynth(b), "bench", 0, size); err != nil {
						b.Fatal(err)
					}
					ingest = time.Since(start)
					chunks, _ = all.Chunks.For("bench").Count(ctx)
					if _, err := k.Search(ctx, kb.SearchRequest{Client: "bench", Query: "warm up"}); err != nil {
						b.Fatal(err)
					}
					b.Logf("%s: %d chunks ingested in %s", backend, chunks, ingest.Round(time.Millisecond))
				}
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					t0 := time.Now()
					if _, err := k.Search(ctx, kb.SearchRequest{Client: "bench", Query: queries[i%len(queries)].Query, Expand: ptr(2)}); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(chunks)/ingest.Seconds(), "ingest-chunks/s")
				b.ReportMetric(float64(chunks/benchcorpus.ChunksPerDoc)/ingest.Seconds(), "ingest-docs/s")
			})
			for _, class := range classes { // the corpus goes with the benchmark
				req, _ := http.NewRequest("DELETE", u+"/v1/schema/"+class, nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}
}
