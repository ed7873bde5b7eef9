package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/benchcorpus"
	"github.com/jervis-dev/jervis/kb/embed/glove"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	ragsqlite "github.com/jervis-dev/jervis/kb/rag/sqlite"
)

// BenchmarkSearchHTTP measures POST /api/v1/search over loopback at 100,000
// chunks (the kb benchmarks' corpus; JERVIS_BENCH_DIR keeps it between runs)
// with 1 and 16 concurrent clients, each sending the search test queries
// one after another with depth-2 expansion. It reports p50 and p99 latency
// as the client sees it, and requests/s. The load is bounded: 50 requests per
// client per b.N, 2 minutes at most.
func BenchmarkSearchHTTP(b *testing.B) {
	const size = 100_000
	ctx := context.Background()
	dir := b.TempDir()
	if cache := os.Getenv("JERVIS_BENCH_DIR"); cache != "" {
		dir = filepath.Join(cache, fmt.Sprint(size))
	}
	// The chunk store as jervis serve opens it: the vector lists from the
	// configuration's default (100,000 chunks: this corpus is partitioned).
	all := embeddedtest.OpenWith(b, dir, embedded.Backends{VectorLists: config.DefaultVectorLists})
	st, k, g, c, emb := all.Store, all.KB.KB, all.Graph, all.Chunks, all.Embedder.(*glove.Embedder)

	var corpus []struct{ Content string }
	var queries []struct{ Query string }
	for path, v := range map[string]any{"../kb/testdata/search/corpus.json": &corpus, "../kb/testdata/search/queries.json": &queries} {
		raw, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			b.Fatal(err)
		}
	}
	var topical []string
	for _, d := range corpus {
		topical = append(topical, d.Content)
	}
	start := time.Now()
	have, _ := c.For("bench").Count(ctx)
	if err := benchcorpus.Fill(ctx, k, benchcorpus.New(emb.Vocabulary(30_000), topical), "bench", have, size); err != nil {
		b.Fatal(err)
	}
	n, _ := c.For("bench").Count(ctx)
	secret, key, err := api.NewKey(store.RoleClient, "bench", "benchmark")
	if err != nil {
		b.Fatal(err)
	}
	if err := st.CreateAPIKey(ctx, key); err != nil {
		b.Fatal(err)
	}
	s := api.New(api.Config{Store: st, KB: k, Graph: g, Chunks: c, RateLimit: -1})
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b.Logf("%d chunks ready in %s", n, time.Since(start).Round(time.Second))

	search := func(client *http.Client, q string) (time.Duration, error) {
		body, _ := json.Marshal(map[string]any{"query": q, "expand": 2})
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/search", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+secret)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(t0), err
	}
	warm := &http.Client{}
	for _, q := range queries { // loads the vectors, warms the caches
		if _, err := search(warm, q.Query); err != nil {
			b.Fatal(err)
		}
	}
	c.(*ragsqlite.Store).Settle() // the lists in, as a server's are once trained
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			perClient := 50 * b.N
			deadline := time.Now().Add(2 * time.Minute)
			lat := make([][]time.Duration, clients)
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range clients {
				wg.Go(func() {
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
					for i := range perClient {
						if time.Now().After(deadline) {
							return
						}
						d, err := search(client, queries[(w*7+i)%len(queries)].Query)
						if err != nil {
							failed.Store(err)
							return
						}
						lat[w] = append(lat[w], d)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			all := slices.Sorted(slices.Values(slices.Concat(lat...)))
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "req/s")
			b.Logf("p90 %s p95 %s p99 %s max %s", all[len(all)*90/100], all[len(all)*95/100], all[len(all)*99/100], all[len(all)-1])
			b.ReportMetric(0, "ns/op")
		})
	}
	runtime.KeepAlive(s)
}
