package weaviate_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
func TestConformance(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	ragtest.ExerciseCaps(t, func(t *testing.T) rag.Store {
		s, err := weaviate.Open(weaviate.Config{URL: u, Class: fmt.Sprintf("JervisTest%d_%d", time.Now().UnixNano()%1e9, classes.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.DeleteClass(context.Background()) })
		return s
	}, ragtest.Caps{Stemming: true, FoldsAccents: true})
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
