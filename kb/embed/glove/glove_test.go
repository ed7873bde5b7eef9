package glove_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
	"testing"

	"github.com/jervis-dev/jervis/kb/embed/glove"
)

func cos(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func newEmbedder(t testing.TB) *glove.Embedder {
	t.Helper()
	e, err := glove.New()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestVocabularyAndShape(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	if e.Dimension() != 100 || e.Model() != glove.Model {
		t.Fatalf("dim %d model %s", e.Dimension(), e.Model())
	}
	for _, w := range []string{"the", "database", "deploy", "invoice", "kitten", "coffee"} {
		if !e.Known(w) {
			t.Errorf("%q not in the vocabulary", w)
		}
	}
	v := e.EmbedOne("The database migration failed")
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if math.Abs(n-1) > 1e-4 {
		t.Fatalf("norm² %v", n)
	}
	if z := e.EmbedOne(" \t--- "); cos(z, z) != 0 {
		t.Fatal("a text without tokens must embed to the zero vector")
	}
	a, b := e.EmbedOne("Same TEXT here"), e.EmbedOne("same text here")
	if cos(a, b) < 0.9999 {
		t.Fatal("case changes the vector")
	}
}

func TestSimilarityMakesSense(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	for _, tc := range []struct{ anchor, near, far string }{
		{"The cat sat on the mat.", "A kitten slept on the rug.", "Quarterly revenue grew in Europe."},
		{"The production database is down.", "Our SQL server crashed overnight.", "Lunch will be served at noon."},
		{"Please review the pull request before Friday.", "Can you check my code changes by the end of the week?", "The hotel in Lisbon has a pool."},
		{"Invoice 2291 is overdue, payment required.", "The bill has not been paid yet.", "The build pipeline is green again."},
	} {
		a, n, f := e.EmbedOne(tc.anchor), e.EmbedOne(tc.near), e.EmbedOne(tc.far)
		if cos(a, n) <= cos(a, f) {
			t.Errorf("%q: near %.3f <= far %.3f", tc.anchor, cos(a, n), cos(a, f))
		}
	}
}

// Out-of-vocabulary tokens get stable, distinct directions.
func TestOutOfVocabularyTokens(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	if e.Known("zyqlorp") || e.Known("brimvex") {
		t.Fatal("test words are in the vocabulary")
	}
	a, a2, b := e.EmbedOne("Zyqlorp"), e.EmbedOne("zyqlorp"), e.EmbedOne("brimvex")
	if cos(a, a2) < 0.9999 || math.Abs(cos(a, b)) > 0.35 {
		t.Fatalf("same OOV %.3f, different OOV %.3f", cos(a, a2), cos(a, b))
	}
	// A shared rare name pulls two otherwise different texts together.
	x, y, z := e.EmbedOne("ask zyqlorp about the outage"), e.EmbedOne("zyqlorp wrote the report"), e.EmbedOne("brimvex wrote the report")
	if cos(x, y) <= cos(x, z) {
		t.Fatalf("shared OOV token: %.3f <= %.3f", cos(x, y), cos(x, z))
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	want := e.EmbedOne("deploy the release to production")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			vs, err := e.Embed(t.Context(), []string{"deploy the release to production", "other"})
			if err != nil || cos(vs[0], want) < 0.9999 {
				t.Error("concurrent embedding differs")
			}
		})
	}
	wg.Wait()
}

// BenchmarkEmbedSentences reports sentences/s for typical 12-20 word
// sentences (target: 20,000/s).
func BenchmarkEmbedSentences(b *testing.B) {
	e := newEmbedder(b)
	sentences := make([]string, 1000)
	for i := range sentences {
		sentences[i] = fmt.Sprintf("Ann asked Bob on Tuesday to review pull request %d for the billing service before the release freeze.", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Embed(b.Context(), sentences); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(sentences))/b.Elapsed().Seconds(), "sentences/s")
}

// BenchmarkEmbedIdentifiers: sentences of a tracker, half their tokens
// out of the vocabulary (keys, versions, hashes, API names).
func BenchmarkEmbedIdentifiers(b *testing.B) {
	e := newEmbedder(b)
	sentences := make([]string, 1000)
	for i := range sentences {
		sentences[i] = fmt.Sprintf("TIMOB-%d: Ti.UI.createTableViewRow crashes on iOS 7 with SDK 3.2.0.v2013%04d, see commit 9f%xa1 and JIRA-%d", 20000+i, i, i*7919, i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Embed(b.Context(), sentences); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(sentences))/b.Elapsed().Seconds(), "sentences/s")
}

// WordWeight: the commonest words weigh least, rare ones near 1, and a
// word not in the vocabulary weighs as the rarest.
func TestWordWeight(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	the, window, nullpointer := e.WordWeight("the"), e.WordWeight("window"), e.WordWeight("nullpointerexception")
	if !(the < 0.1 && the < window && window < nullpointer && nullpointer <= 1) {
		t.Fatalf("the %v, window %v, nullpointerexception %v", the, window, nullpointer)
	}
	if rarest := e.WordWeight(e.Vocabulary(100_000)[99_999]); nullpointer != rarest {
		t.Fatalf("unknown %v, rarest known %v", nullpointer, rarest)
	}
}

// The embedder's output is pinned to the last bit, in-vocabulary and
// out-of-vocabulary words alike: vectors a store holds were made by it,
// and a change to what it computes (vectors.bin, the weights, the OOV
// hashing) is a new model whose vectors do not compare with the stored
// ones — it needs Model() to change and every client reprocessed, not a
// refactor.
func TestOutputIsPinned(t *testing.T) {
	t.Parallel()
	e := newEmbedder(t)
	v := e.EmbedOne("zyqlorp brimvex TIMOB-1234 Ti.UI.Window qwxz9 the build failed")
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	if got := crc32.ChecksumIEEE(b); got != 0x4a723d11 {
		t.Fatalf("vector checksum %08x, pinned 4a723d11: the embedder computes other vectors", got)
	}
}
