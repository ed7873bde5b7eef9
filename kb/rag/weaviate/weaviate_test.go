package weaviate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/ragtest"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

var classes atomic.Int64

// The conformance suite against a real Weaviate: each test gets a class of
// its own, deleted after. Weaviate's BM25 neither stems nor folds accents:
// the backend gives it stems without accents (Stems).
// The suite runs twice: batch writes over REST, and over gRPC.
func TestConformance(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	for _, transport := range []string{"REST", "gRPC"} {
		t.Run(transport, func(t *testing.T) {
			var grpc string
			if transport == "gRPC" {
				grpc = integration.Env(t, "TEST_WEAVIATE_GRPC", "export TEST_WEAVIATE_GRPC=$(deploy/weaviate.sh grpc)")
			}
			ragtest.ExerciseCaps(t, func(t *testing.T) rag.Store {
				s, err := weaviate.Open(weaviate.Config{URL: u, GRPC: grpc, Class: fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				if err := s.Ping(t.Context()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.DeleteClass(context.Background()) })
				return s
			}, ragtest.Caps{Stemming: true, FoldsAccents: true})
		})
	}
}

// A gRPC address nothing answers at fails Ping (so /readyz), naming it;
// one that is not host:port fails Open.
func TestGRPCAddressChecked(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	if _, err := weaviate.Open(weaviate.Config{URL: u, GRPC: "weaviate"}); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("open with grpc weaviate: %v", err)
	}
	s, err := weaviate.Open(weaviate.Config{URL: u, GRPC: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "grpc 127.0.0.1:1") {
		t.Fatalf("ping: %v", err)
	}
}

// Stems are what the stemmed properties hold and BM25 is asked: the
// words, lower-cased, accents folded, as English Snowball stems.
func TestStems(t *testing.T) {
	for in, want := range map[string]string{
		"App crashes when opening Ti.UI.Window": "app crash when open ti ui window",
		"Crêpes, reviews; café":                 "crepe review cafe",
		"TIMOB-1234 NullPointerException":       "timob 1234 nullpointerexcept",
		"":                                      "",
	} {
		if got := weaviate.Stems(in); got != want {
			t.Errorf("Stems(%q) = %q, want %q", in, got, want)
		}
	}
}

// A search asks for the client's count twice (VectorCount for the common
// directions, DocFreqs for feedback's weights): the backend counts once a
// second, and again at once after its own writes. Requests go through a
// proxy to the real server that counts the Aggregates of a count.
func TestCountsAreKeptForASecond(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	var counts atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("meta{count}")) && !bytes.Contains(body, []byte("where:")) {
			counts.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := weaviate.Open(weaviate.Config{URL: srv.URL, Class: fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DeleteClass(context.Background()) })
	ctx := t.Context()
	x := s.For("acme")
	chunk := func(i int) rag.Chunk {
		return rag.Chunk{ID: fmt.Sprintf("c%d", i), Text: fmt.Sprintf("chunk %d about the gateway", i), SourceURN: fmt.Sprintf("doc:%d", i), Vector: []float32{1, float32(i)}}
	}
	if err := x.Upsert(ctx, chunk(1), chunk(2), chunk(3)); err != nil {
		t.Fatal(err)
	}
	sampler, counter := x.(rag.VectorSampler), x.(rag.TermCounter)
	start := time.Now()
	before := counts.Load()
	for range 5 {
		if n, err := sampler.VectorCount(ctx); err != nil || n != 3 {
			t.Fatalf("VectorCount = %d, %v; want 3", n, err)
		}
		if _, total, err := counter.DocFreqs(ctx, []string{"gateway"}); err != nil || total != 3 {
			t.Fatalf("DocFreqs' total = %d, %v; want 3", total, err)
		}
	}
	if got := counts.Load() - before; got != 1 && time.Since(start) < time.Second {
		t.Fatalf("10 counts within a second asked Weaviate %d times, want once", got)
	}
	if _, err := x.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	before = counts.Load()
	if n, err := sampler.VectorCount(ctx); err != nil || n != 2 {
		t.Fatalf("after a delete: VectorCount = %d, %v; want 2", n, err)
	}
	if got := counts.Load() - before; got != 1 {
		t.Fatalf("the count after a delete asked Weaviate %d times, want once", got)
	}
	time.Sleep(1100 * time.Millisecond)
	before = counts.Load()
	if n, err := sampler.VectorCount(ctx); err != nil || n != 2 {
		t.Fatalf("a second later: VectorCount = %d, %v; want 2", n, err)
	}
	if got := counts.Load() - before; got != 1 {
		t.Fatalf("a second later the count asked Weaviate %d times, want once", got)
	}
	if n, err := x.Count(ctx); err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}
}

// The class indexes what is read and no more: BM25 reads the stems only,
// filters the chunk's ID, source, kind, node and text (its words' counts);
// the title and the client's ID are only kept; the HNSW graph is built
// with a narrower search than Weaviate's default. Read back from the real
// server's schema.
func TestOnlyWhatIsReadIsIndexed(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	class := fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))
	s, err := weaviate.Open(weaviate.Config{URL: u, Class: class})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DeleteClass(context.Background()) })
	if err := s.For("acme").Upsert(t.Context(), rag.Chunk{ID: "c1", Text: "the gateway", Title: "Gateway", SourceURN: "doc:1", Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u + "/v1/schema/" + class)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var schema struct {
		Properties []struct {
			Name            string
			IndexFilterable bool
			IndexSearchable bool
		}
		VectorIndexConfig struct {
			EfConstruction int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&schema); err != nil {
		t.Fatal(err)
	}
	if ef := schema.VectorIndexConfig.EfConstruction; ef != 64 {
		t.Errorf("HNSW efConstruction %d, want 64", ef)
	}
	want := map[string][2]bool{ // filterable, searchable
		"chunkId": {true, false}, "text": {true, false}, "sourceUrn": {true, false}, "sourceType": {true, false},
		"kind": {true, false}, "nodeKey": {true, false}, "clientId": {false, false}, "title": {false, false},
		"stemmed": {false, true}, "stemmedTitle": {false, true}, "graphRefs": {true, false}, "nodeTypes": {true, false},
	}
	seen := 0
	for _, p := range schema.Properties {
		w, ok := want[p.Name]
		if !ok {
			continue
		}
		seen++
		if got := [2]bool{p.IndexFilterable, p.IndexSearchable}; got != w {
			t.Errorf("%s: filterable, searchable %v, want %v", p.Name, got, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of the %d properties in the schema: %+v", seen, len(want), schema.Properties)
	}
}

// A listing of several sources' chunks that may have stopped at the
// listing bound is asked again in halves, so none is lost.
func TestSourcesChunkIDsPastTheListBound(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	s, err := weaviate.Open(weaviate.Config{URL: u, Class: fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DeleteClass(context.Background()) })
	s.SetListMax(3)
	x := s.For("acme")
	want := map[string][]string{"a": {"a-1", "a-2"}, "b": {"b-1", "b-2"}, "c": {"c-1"}, "d": {"d-1", "d-2"}}
	var chunks []rag.Chunk
	for urn, ids := range want {
		for _, id := range ids {
			chunks = append(chunks, rag.Chunk{ID: id, Text: "chunk " + id, SourceURN: urn, Vector: []float32{1, 0, 0, 0}})
		}
	}
	if err := x.Upsert(t.Context(), chunks...); err != nil {
		t.Fatal(err)
	}
	got, err := x.SourcesChunkIDs(t.Context(), []string{"d", "c", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sources' chunks: %v, want %v", got, want)
	}
}
