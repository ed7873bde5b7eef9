package sqlite

import (
	"math"
	"math/rand/v2"
	"testing"
)

// dots (AVX2 where the CPU has it) agrees with the plain Go loop for every
// dimension around the block sizes, at any row offset.
func TestDotsMatchPlainGo(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for dim := 1; dim <= 70; dim++ {
		const rows = 9
		q := make([]float32, dim)
		flat := make([]float32, rows*dim+3)
		for i := range q {
			q[i] = r.Float32()*2 - 1
		}
		for i := range flat {
			flat[i] = r.Float32()*2 - 1
		}
		for _, off := range []int{0, 1, 3} {
			got, want := make([]float32, rows), make([]float32, rows)
			dots(q, flat[off:off+rows*dim], dim, got)
			dotsGo(q, flat[off:off+rows*dim], dim, want)
			for j := range got {
				if d := math.Abs(float64(got[j] - want[j])); d > 1e-5 {
					t.Fatalf("dim %d offset %d row %d: %v, plain Go %v", dim, off, j, got[j], want[j])
				}
			}
		}
	}
	dots([]float32{1}, nil, 1, nil) // no rows: nothing read
}

// BenchmarkDots scores 100,000 rows of 100 dimensions (the GloVe default),
// the exact scan's inner loop, with dots and with the plain Go loop.
func BenchmarkDots(b *testing.B) {
	const rows, dim = 100_000, 100
	r := rand.New(rand.NewPCG(1, 2))
	q, flat, out := make([]float32, dim), make([]float32, rows*dim), make([]float32, scanBlock)
	for i := range flat {
		flat[i] = r.Float32()
	}
	copy(q, flat)
	for name, f := range map[string]func(q, flat []float32, dim int, out []float32){"dots": dots, "plain-go": dotsGo} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for start := 0; start < rows; start += scanBlock {
					n := min(scanBlock, rows-start)
					f(q, flat[start*dim:(start+n)*dim], dim, out[:n])
				}
			}
		})
	}
}
