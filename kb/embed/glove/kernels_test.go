package glove

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb/rag"
)

// referenceEmbed is embed as it was written first: a token's vector added
// one component at a time, an unknown token's signs read by stepping the
// xorshift from its seed. The kernels must give the same vectors to the last bit.
func (e *Embedder) referenceEmbed(text string) []float32 {
	acc := make([]float32, e.dim)
	var lower [64]byte
	forEachToken(text, func(tok string) {
		tok = lowerASCII(tok, lower[:0])
		if i, ok := e.words.Find(tok); ok {
			w := e.weights[i] * e.scales[i]
			for j, q := range e.values[int(i)*e.dim : int(i+1)*e.dim] {
				acc[j] += w * float32(q)
			}
			return
		}
		x := oovSeed(tok) // the hash as it was; the signs below are the reference
		scale := math.Float32bits(e.oovW * 5 / float32(math.Sqrt(float64(e.dim))))
		for j := range acc {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			acc[j] += math.Float32frombits(scale ^ uint32(x&1)<<31)
		}
	})
	return rag.Normalize(acc)
}

func TestKernelsGiveTheSameVectors(t *testing.T) {
	t.Parallel()
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"the", "release", "Window", "deploy", "TIMOB-20011", "Ti.UI.createTableViewRow", "9f3a1", "v2013", "über",
		"naïve", "日本", "x", "ζ", "NullPointerException", "3.2.0", "_", " ", ", ", "\n", "a1b2c3d4e5f6a7b8c9d0"}
	r := rand.New(rand.NewPCG(3, 4))
	texts := []string{"", "the", "qwxzvk", strings.Repeat("zzqx ", 300)}
	for range 3000 {
		var b strings.Builder
		for range 1 + r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
			if r.IntN(3) == 0 {
				b.WriteString(string(rune('a' + r.IntN(26))))
				b.WriteString(string(rune('0' + r.IntN(10))))
			}
			b.WriteByte(' ')
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		got, want := e.EmbedOne(s), e.referenceEmbed(s)
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("%q: component %d is %v, the reference's %v", s, j, got[j], want[j])
			}
		}
	}
}

// signRows reads the xorshift's low bits from any seed, for as many steps
// as asked (a dimension other than the model's too).
func TestSignRowsAreTheXorshiftsLowBits(t *testing.T) {
	t.Parallel()
	rows := signRows(300)
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		seed := r.Uint64() | 1
		x := seed
		for j, row := range rows {
			x = xorshift(x)
			if got := uint64(popcount(row&seed) & 1); got != x&1 {
				t.Fatalf("seed %#x, step %d: %d, the xorshift's %d", seed, j+1, got, x&1)
			}
		}
	}
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}
