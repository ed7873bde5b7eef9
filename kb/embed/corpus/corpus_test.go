package corpus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// topics builds a corpus of n topics, perItem items each, whose titles and
// bodies use disjoint words: topic t's titles draw on its own title words
// ("tat3w1"), its bodies on its own body words ("tbt3w7"), and both on
// words every topic uses. A title shares no word with any body, so only
// what the encoder learned from the items joins a title to its topic's
// bodies.
func topics(rng *rand.Rand, n, perItem int) (pairs []Pair, topic []int) {
	shared := func() string { return fmt.Sprintf("common%d", rng.IntN(40)) }
	for t := range n {
		for range perItem {
			pairs = append(pairs, Pair{Title: title(rng, t), Body: body(rng, t, shared)})
			topic = append(topic, t)
		}
	}
	return pairs, topic
}

func title(rng *rand.Rand, t int) string {
	var ws []string
	for range 3 {
		ws = append(ws, fmt.Sprintf("ta%dw%d", t, rng.IntN(8)))
	}
	return strings.Join(ws, " ")
}

func body(rng *rand.Rand, t int, shared func() string) string {
	var ws []string
	for range 12 {
		ws = append(ws, fmt.Sprintf("tb%dw%d", t, rng.IntN(12)), shared())
	}
	return strings.Join(ws, " ")
}

func TestTrainBringsTitlesNearTheirBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs, _ := topics(rng, 30, 20)
	o := Options{Dim: 32, Epochs: 10, Batch: 128, Seed: 7}
	o.defaults()
	// The latent semantic analysis the training starts from.
	lsa, _, _, err := prepare(pairs, o, rand.New(rand.NewPCG(o.Seed, 0x6a657276)))
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	o.Progress = func(_ int, loss float64) { losses = append(losses, loss) }
	m, err := Train(t.Context(), pairs, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(losses) != o.Epochs || losses[len(losses)-1] > 0.5*losses[0] {
		t.Fatalf("the loss did not fall by half over the epochs: %.3f", losses)
	}
	before, after := titleMRR(t, lsa, pairs), titleMRR(t, m, pairs)
	t.Logf("a title's own body among all: MRR %.3f by the LSA, %.3f trained", before, after)
	if after < before+0.2 {
		t.Errorf("trained, a title finds its own body at MRR %.3f; by the LSA it starts from, %.3f", after, before)
	}
}

// titleMRR is the mean reciprocal rank of each pair's own body among all
// the bodies, its title the query.
func titleMRR(t *testing.T, m *Model, pairs []Pair) float64 {
	var titles, bodies []string
	for _, p := range pairs {
		titles, bodies = append(titles, p.Title), append(bodies, p.Body)
	}
	tv, err := m.Embed(t.Context(), titles)
	if err != nil {
		t.Fatal(err)
	}
	bv, err := m.Embed(t.Context(), bodies)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i := range pairs {
		rank := 1
		own := dot(tv[i], bv[i])
		for j := range bv {
			if j != i && dot(tv[i], bv[j]) > own {
				rank++
			}
		}
		sum += 1 / float64(rank)
	}
	return sum / float64(len(pairs))
}

// The gradient training follows is the loss's: each coordinate checked
// against a central difference.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pairs, _ := topics(rng, 4, 3)
	words, idf := vocabulary(docFreqs(pairs), len(pairs), 1, 1, 1000)
	lookup := func(w string) (int32, bool) { j, ok := words[w]; return j, ok }
	var q, d [][]entry
	for _, p := range pairs {
		q = append(q, tfidf(tokens(p.Title), lookup, idf))
		d = append(d, tfidf(tokens(p.Body), lookup, idf))
	}
	const dim = 6
	m := &Model{words: words, idf: idf, dim: dim, vecs: make([]float32, len(idf)*dim)}
	for i := range m.vecs {
		m.vecs[i] = rng.Float32() - 0.5
	}
	idx := []int{0, 3, 5, 8, 11, 2}
	st := newStepper(m, q, d, len(idx), 0.5)
	st.gradient(idx)
	grad := slices.Clone(st.grad)
	loss := func() float64 {
		s := newStepper(m, q, d, len(idx), 0.5)
		return s.gradient(idx)
	}
	checked := 0
	for i := range m.vecs {
		if grad[i] == 0 {
			continue // a word of none of the batch's texts
		}
		const h = 1e-2
		w := m.vecs[i]
		m.vecs[i] = w + h
		up := loss()
		m.vecs[i] = w - h
		down := loss()
		m.vecs[i] = w
		num := (up - down) / (2 * h)
		if diff := math.Abs(num - float64(grad[i])); diff > 0.02*math.Max(math.Abs(num), math.Abs(float64(grad[i])))+2e-3 {
			t.Errorf("coordinate %d: gradient %.5f, finite difference %.5f", i, grad[i], num)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d coordinates checked", checked)
	}
}

func TestModelRoundTripsAndIsDeterministic(t *testing.T) {
	pairs, _ := topics(rand.New(rand.NewPCG(5, 6)), 10, 12)
	o := Options{Dim: 16, Epochs: 3, Batch: 32, Seed: 9}
	a, err := Train(t.Context(), pairs, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train(t.Context(), pairs, o)
	if err != nil {
		t.Fatal(err)
	}
	if a.Model() != b.Model() || !strings.HasPrefix(a.Model(), "corpus-") {
		t.Fatalf("two trainings with one seed: %s and %s", a.Model(), b.Model())
	}
	reversed := slices.Clone(pairs)
	slices.Reverse(reversed)
	if r, err := Train(t.Context(), reversed, o); err != nil || r.Model() != a.Model() {
		t.Fatalf("the same pairs in another order: %v (%v), want %s", r, err, a.Model())
	}
	o.Seed = 10
	if c, err := Train(t.Context(), pairs, o); err != nil || c.Model() == a.Model() {
		t.Fatalf("another seed, the same model %s (%v)", a.Model(), err)
	}
	raw, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	if back.Model() != a.Model() || back.Dimension() != 16 || back.Words() != a.Words() {
		t.Fatalf("loaded %s (%d-d, %d words), wrote %s (%d words)", back.Model(), back.Dimension(), back.Words(), a.Model(), a.Words())
	}
	texts := []string{pairs[0].Title, pairs[5].Body, "nothing known here", ""}
	va, _ := a.Embed(t.Context(), texts)
	vb, _ := back.Embed(t.Context(), texts)
	if !slices.EqualFunc(va, vb, slices.Equal) {
		t.Error("the loaded model embeds otherwise")
	}
	if n := dot(va[0], va[0]); math.Abs(float64(n)-1) > 1e-5 {
		t.Errorf("a vector of length² %v, want 1", n)
	}
	for _, v := range va[2:] {
		if slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
			t.Errorf("a text of unknown words: %v, want the zero vector", v)
		}
	}
	for _, bad := range []struct {
		b     []byte
		newer bool // a later format; the rest are damaged
	}{
		{nil, false}, {[]byte("JVCE"), false}, {append([]byte("JVCE\x02"), raw[5:]...), true}, {append([]byte("JVCE\x00"), raw[5:]...), false},
		{raw[:len(raw)-3], false}, {append(slices.Clone(raw), 0), false},
	} {
		_, err := Load(bad.b)
		if !errors.Is(err, ErrFormat) || errors.Is(err, ErrNewer) != bad.newer {
			t.Errorf("Load of %d bytes: %v, want ErrFormat (written by a newer jervis: %t)", len(bad.b), err, bad.newer)
		}
	}
}

func TestTooFewOrCancelled(t *testing.T) {
	pairs, _ := topics(rand.New(rand.NewPCG(7, 8)), 3, 5)
	if _, err := Train(t.Context(), pairs, Options{Dim: 8}); !errors.Is(err, ErrTooFew) {
		t.Errorf("15 pairs: %v, want ErrTooFew", err)
	}
	pairs, _ = topics(rand.New(rand.NewPCG(7, 8)), 10, 12)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Train(ctx, pairs, Options{Dim: 16}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// BenchmarkEmbed embeds chunk-sized texts (a title and 40 words) by a
// model of 100 dimensions; texts/s is what ingest gets from it.
func BenchmarkEmbed(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs, _ := topics(rng, 60, 20)
	m, err := Train(b.Context(), pairs, Options{Dim: 100, Epochs: 2})
	if err != nil {
		b.Fatal(err)
	}
	texts := make([]string, 64)
	for i := range texts {
		p := pairs[rng.IntN(len(pairs))]
		texts[i] = p.Title + "\n" + p.Body
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Embed(b.Context(), texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "texts/s")
}
