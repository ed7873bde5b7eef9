// Package corpus is an encoder learned from one client's own items, pure
// Go, with no weights from anywhere: the client's corpus is its training
// data.
//
// A text is its TF-IDF vector over the client's vocabulary (words in at
// least two items and at most half of them, stop words left out, term
// frequencies dampened by their logarithm, the vector scaled to length 1)
// times a table of word vectors; the result is scaled to length 1. The
// table starts as the latent semantic analysis of the items (the top right
// singular vectors of their TF-IDF matrix, by a randomized SVD) and is then
// trained as a dual encoder whose two sides share it: each item's title is
// the query, its body the passage that should come first, the other bodies
// of a batch the ones that should not (in-batch negatives, a softmax at a
// temperature, both ways; Adam). So what sits near what is what this
// client's own items say: a summary's words land near the words its issue
// goes on to use ("crash" near its stack trace's "exception"), in the
// client's own vocabulary (its project's keys, its API's names, its error
// codes), which no general-purpose model knows.
//
// Measured on the dev Jira corpus (BENCHMARKS.md, thirty-first round):
// through search, vectors alone find a duplicate's original among the top
// ten for 0.64 of the pairs, GloVe's averaged word vectors for 0.23.
package corpus

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"

	"github.com/jervis-dev/jervis/kb/rag"
)

// Pair is one training example: an item's title and its body.
type Pair struct{ Title, Body string }

// Options are the training's settings; the zero value of each field is its
// default.
type Options struct {
	Dim          int     // vector length (default 100)
	Epochs       int     // passes over the pairs (default DefaultEpochs)
	Batch        int     // pairs a step, each the others' negatives (default 512)
	Temperature  float64 // of the softmax over a batch (default 0.1)
	LearningRate float64 // Adam's (default 0.003)
	MinItems     int     // items a word must be in (default 2)
	MaxShare     float64 // share of the items a word may be in (default 0.5)
	MaxWords     int     // the vocabulary's size at most: the words in most items (default 50,000)
	MaxPairs     int     // pairs trained on at most, a sample beyond (default 50,000)
	Seed         uint64  // of the initial directions, the sample and the batches
	// Progress, if set, is told of each epoch's end and its mean loss.
	Progress func(epoch int, loss float64)
}

func (o *Options) defaults() {
	o.Dim = cmp.Or(o.Dim, 100)
	o.Epochs = cmp.Or(o.Epochs, DefaultEpochs)
	o.Batch = cmp.Or(o.Batch, 512)
	o.Temperature = cmp.Or(o.Temperature, 0.1)
	o.LearningRate = cmp.Or(o.LearningRate, 0.003)
	o.MinItems = cmp.Or(o.MinItems, 2)
	o.MaxShare = cmp.Or(o.MaxShare, 0.5)
	o.MaxWords = cmp.Or(o.MaxWords, 50_000)
	o.MaxPairs = cmp.Or(o.MaxPairs, 50_000)
}

// DefaultEpochs is how many passes over the pairs a training makes unless
// told otherwise.
const DefaultEpochs = 10

// MinPairs is the fewest pairs an encoder is trained on: with fewer, a
// batch's negatives are too few to teach anything.
const MinPairs = 32

// ErrTooFew means the items were too few (or said too little) to train on.
var ErrTooFew = errors.New("too few items to train an encoder on")

// Model is a trained encoder. It is safe for concurrent use.
type Model struct {
	words map[string]int32
	idf   []float32
	dim   int
	vecs  []float32 // len(idf) × dim, row by row
	name  string
}

// Model implements embed.Embedder: "corpus-" and a hash of the model, so
// that vectors of two trainings are never taken for comparable.
func (m *Model) Model() string { return m.name }

// Dimension implements embed.Embedder.
func (m *Model) Dimension() int { return m.dim }

// Words is the size of the model's vocabulary.
func (m *Model) Words() int { return len(m.idf) }

// Embed implements embed.Embedder. A text with none of the vocabulary's
// words has the zero vector.
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := make([]float32, m.dim)
		encode(m.vecs, m.dim, m.row(t), v)
		normalize(v)
		out[i] = v
	}
	return out, nil
}

// entry is one word of a sparse TF-IDF row.
type entry struct {
	word int32
	w    float32
}

// tokens are text's words as the vocabulary counts them: lower-case runs
// of letters and digits with a letter in them, two characters or more, stop
// words left out.
func tokens(text string) []string {
	ws := rag.Words(text)
	out := ws[:0]
	for _, w := range ws {
		if len(w) >= 2 && !rag.StopWord(w) && strings.ContainsFunc(w, unicode.IsLetter) {
			out = append(out, w)
		}
	}
	return out
}

// row is text's TF-IDF row over the vocabulary, of length 1 (empty: none
// of its words are known).
func (m *Model) row(text string) []entry {
	return tfidf(tokens(text), func(w string) (int32, bool) { j, ok := m.words[w]; return j, ok }, m.idf)
}

func tfidf(words []string, lookup func(string) (int32, bool), idf []float32) []entry {
	counts := map[int32]int{}
	for _, w := range words {
		if j, ok := lookup(w); ok {
			counts[j]++
		}
	}
	r := make([]entry, 0, len(counts))
	var sum float64
	for j, c := range counts {
		w := (1 + math.Log(float64(c))) * float64(idf[j])
		r = append(r, entry{j, float32(w)})
		sum += w * w
	}
	slices.SortFunc(r, func(a, b entry) int { return cmp.Compare(a.word, b.word) }) // a deterministic sum
	for i := range r {
		r[i].w /= float32(math.Sqrt(sum))
	}
	return r
}

// encode sets h to row times the table vecs (rows of dim).
func encode(vecs []float32, dim int, row []entry, h []float32) {
	clear(h)
	for _, e := range row {
		v := vecs[int(e.word)*dim : int(e.word+1)*dim]
		for k, x := range v {
			h[k] += e.w * x
		}
	}
}

// normalize scales v to length 1 and returns its length before (v stays
// zero if it was).
func normalize(v []float32) float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	n := float32(math.Sqrt(s))
	if n > 0 {
		for k := range v {
			v[k] /= n
		}
	}
	return n
}

// vocabulary keeps the words of df (the items each is in, of n) in at
// least minItems and at most maxShare of them (the maxWords in most, if
// more), in sorted order, with their smoothed IDF (ln((1+n)/(1+df)) + 1).
func vocabulary(df map[string]int, n, minItems int, maxShare float64, maxWords int) (map[string]int32, []float32) {
	var kept []string
	for w, c := range df {
		if c >= minItems && float64(c) <= maxShare*float64(n) {
			kept = append(kept, w)
		}
	}
	if len(kept) > maxWords {
		slices.SortFunc(kept, func(a, b string) int { return cmp.Or(cmp.Compare(df[b], df[a]), strings.Compare(a, b)) })
		kept = kept[:maxWords]
	}
	slices.Sort(kept)
	words := make(map[string]int32, len(kept))
	idf := make([]float32, len(kept))
	for j, w := range kept {
		words[w] = int32(j)
		idf[j] = float32(math.Log(float64(1+n)/float64(1+df[w])) + 1)
	}
	return words, idf
}

// docFreqs counts the items each word is in.
func docFreqs(pairs []Pair) map[string]int {
	df := map[string]int{}
	seen := map[string]bool{}
	for _, p := range pairs {
		clear(seen)
		for _, text := range []string{p.Title, p.Body} {
			for _, w := range tokens(text) {
				if !seen[w] {
					seen[w] = true
					df[strings.Clone(w)]++ // w is a slice of the text's lower-case copy
				}
			}
		}
	}
	return df
}

// Train learns an encoder from pairs (see the package comment). It returns
// ErrTooFew when fewer than MinPairs pairs have known words on both sides.
func Train(ctx context.Context, pairs []Pair, o Options) (*Model, error) {
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x6a657276))
	m, q, d, err := prepare(pairs, o, rng)
	if err != nil {
		return nil, err
	}
	if err := train(ctx, m, q, d, o, rng); err != nil {
		return nil, err
	}
	m.quantize()
	m.name = "corpus-" + m.hash()
	return m, nil
}

// quantize rounds each word's vector to what its stored form keeps: int8
// components at a scale of its own (the largest component's magnitude /
// 127), so that a loaded model is the model trained, to the bit.
func (m *Model) quantize() {
	for j := range m.idf {
		row := m.vecs[j*m.dim : (j+1)*m.dim]
		scale := rowScale(row)
		for k, x := range row {
			row[k] = float32(quantum(x, scale)) * scale
		}
	}
}

func rowScale(row []float32) float32 {
	var mx float32
	for _, x := range row {
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	return mx / 127
}

func quantum(x, scale float32) int8 {
	if scale == 0 {
		return 0
	}
	return int8(max(-127, min(127, math.Round(float64(x/scale)))))
}

// prepare makes the vocabulary of pairs (a sample of o.MaxPairs of them at
// most), the TF-IDF rows of their titles (q) and bodies (d), and a model
// whose table is the items' latent semantic analysis.
func prepare(pairs []Pair, o Options, rng *rand.Rand) (m *Model, q, d [][]entry, err error) {
	// In one order whatever the caller's (a listing's order changes from
	// run to run): the same pairs and seed make the same model.
	pairs = slices.Clone(pairs)
	slices.SortFunc(pairs, func(a, b Pair) int { return cmp.Or(strings.Compare(a.Title, b.Title), strings.Compare(a.Body, b.Body)) })
	if len(pairs) > o.MaxPairs {
		rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		pairs = pairs[:o.MaxPairs]
	}
	// Two passes over the texts, neither keeping their words: the items
	// each word is in, then each pair's rows.
	words, idf := vocabulary(docFreqs(pairs), len(pairs), o.MinItems, o.MaxShare, o.MaxWords)
	lookup := func(w string) (int32, bool) { j, ok := words[w]; return j, ok }
	var x [][]entry
	for _, p := range pairs {
		title, body := tokens(p.Title), tokens(p.Body)
		qi, di := tfidf(title, lookup, idf), tfidf(body, lookup, idf)
		if len(qi) > 0 && len(di) > 0 {
			q, d = append(q, qi), append(d, di)
		}
		if xi := tfidf(append(title, body...), lookup, idf); len(xi) > 0 {
			x = append(x, xi)
		}
	}
	if len(q) < MinPairs || len(idf) < o.Dim || len(x) < o.Dim {
		return nil, nil, nil, fmt.Errorf("%w: %d pairs with known words on both sides, %d items, %d words (at least %d, %d and %d)",
			ErrTooFew, len(q), len(x), len(idf), MinPairs, o.Dim, o.Dim)
	}
	m = &Model{words: words, idf: idf, dim: o.Dim, vecs: topDirections(x, len(idf), o.Dim, rng)}
	return m, q, d, nil
}

// hash is a short hash of the model's words and table.
func (m *Model) hash() string {
	h := sha256.New()
	words := make([]string, len(m.idf))
	for w, j := range m.words {
		words[j] = w
	}
	for _, w := range words {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	_ = binary.Write(h, binary.LittleEndian, m.idf)
	_ = binary.Write(h, binary.LittleEndian, m.vecs)
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// magic begins an encoded model; the byte after it is the format's version.
const magic = "JVCE"

// MarshalBinary implements encoding.BinaryMarshaler: the magic, the
// format's version (formatVersion), the dimension and the vocabulary's
// size (uint32, little-endian), each word (uvarint length, bytes) in index
// order, the IDFs (float32, little-endian), then each word's vector: its
// scale (float32) and its components (int8; value = component × scale).
// About 5 MB for 50,000 words of 100 dimensions.
func (m *Model) MarshalBinary() ([]byte, error) {
	words := make([]string, len(m.idf))
	for w, j := range m.words {
		words[j] = w
	}
	b := make([]byte, 0, 13+len(m.idf)*(16+m.dim))
	b = append(b, magic...)
	b = append(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.dim))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(words)))
	for _, w := range words {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
	}
	for _, f := range m.idf {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	for j := range m.idf {
		row := m.vecs[j*m.dim : (j+1)*m.dim]
		scale := rowScale(row)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
		for _, x := range row {
			b = append(b, byte(quantum(x, scale)))
		}
	}
	return b, nil
}

// ErrFormat means bytes are not a model MarshalBinary wrote.
var ErrFormat = errors.New("not an encoder model")

// ErrNewer means bytes are a model of a later format than this binary
// reads (a newer jervis wrote it); Load's error wraps it with ErrFormat.
// Such a model is not damaged: training it again here would replace it
// with this binary's older format for every process of the deployment.
var ErrNewer = errors.New("written by a newer jervis")

// formatVersion is the model format MarshalBinary writes and Load reads.
const formatVersion = 1

// Load reads a model MarshalBinary wrote.
func Load(b []byte) (*Model, error) {
	if len(b) < 13 || string(b[:4]) != magic {
		return nil, fmt.Errorf("%w: no header", ErrFormat)
	}
	if b[4] > formatVersion {
		return nil, fmt.Errorf("%w: format %d, %w (this one reads %d)", ErrFormat, b[4], ErrNewer, formatVersion)
	}
	if b[4] != formatVersion {
		return nil, fmt.Errorf("%w: format %d", ErrFormat, b[4])
	}
	dim, n := int(binary.LittleEndian.Uint32(b[5:])), int(binary.LittleEndian.Uint32(b[9:]))
	b = b[13:]
	if dim <= 0 || dim > 4096 || n > len(b) {
		return nil, fmt.Errorf("%w: %d dimensions, %d words", ErrFormat, dim, n)
	}
	m := &Model{words: make(map[string]int32, n), idf: make([]float32, n), dim: dim, vecs: make([]float32, 0, min(n*dim, len(b)))}
	for j := range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: word %d cut short", ErrFormat, j)
		}
		m.words[string(b[k:k+int(l)])] = int32(j)
		b = b[k+int(l):]
	}
	if len(m.words) != n || len(b) != n*(8+dim) {
		return nil, fmt.Errorf("%w: %d bytes for %d words of %d dimensions", ErrFormat, len(b), n, dim)
	}
	for j := range n {
		m.idf[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
	b = b[4*n:]
	for range n {
		scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for _, q := range b[4 : 4+dim] {
			m.vecs = append(m.vecs, float32(int8(q))*scale)
		}
		b = b[4+dim:]
	}
	m.name = "corpus-" + m.hash()
	return m, nil
}
