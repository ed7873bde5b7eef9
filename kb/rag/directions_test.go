package rag

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The dominant directions are the leading eigenvectors of the vectors'
// second moments, in order, unit length and orthogonal; vectors spanning
// fewer directions than asked give only those; removing them leaves a
// unit vector orthogonal to each.
func TestDominantDirections(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 8
	var vecs [][]float32
	for range 2000 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		v[5] *= 5 // the most spread axis, then 2
		v[2] *= 3
		vecs = append(vecs, v)
	}
	dirs := DominantDirections(vecs, dim, 2)
	if len(dirs) != 2 {
		t.Fatalf("%d directions, want 2", len(dirs))
	}
	for i, axis := range []int{5, 2} {
		if math.Abs(dirs[i][axis]) < 0.99 {
			t.Errorf("direction %d = %.3f, want about ± axis %d", i, dirs[i], axis)
		}
	}
	if d := dot64(dirs[0], dirs[1]); math.Abs(d) > 1e-9 {
		t.Errorf("directions not orthogonal: %g", d)
	}
	q := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	out := RemoveDirections(q, dirs)
	n := 0.0
	for _, x := range out {
		n += float64(x) * float64(x)
	}
	if math.Abs(n-1) > 1e-5 {
		t.Errorf("|q'|² = %g, want 1", n)
	}
	for i, u := range dirs {
		s := 0.0
		for j, x := range out {
			s += u[j] * float64(x)
		}
		if math.Abs(s) > 1e-5 {
			t.Errorf("q' · direction %d = %g, want 0", i, s)
		}
	}
	// Vectors on a plane have two directions, however many are asked.
	var flat [][]float32
	for range 100 {
		flat = append(flat, []float32{float32(rng.NormFloat64()), float32(rng.NormFloat64()), 0, 0})
	}
	if got := DominantDirections(flat, 4, 3); len(got) != 2 {
		t.Errorf("vectors on a plane: %d directions, want 2", len(got))
	}
	// A query made of the directions alone is kept as it is.
	if got := RemoveDirections([]float32{0, 0, 0, 0, 0, 1, 0, 0}, [][]float64{{0, 0, 0, 0, 0, 1, 0, 0}}); got[5] != 1 {
		t.Errorf("a query along the only direction: %v, want it unchanged", got)
	}
}

func dot64(a, b []float64) float64 {
	s := 0.0
	for j := range a {
		s += a[j] * b[j]
	}
	return s
}

// The estimate a search makes when the client's chunks drift by a tenth:
// 2,000 vectors of 100 dimensions, 4 directions.
func BenchmarkDominantDirections(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 2000)
	for i := range vecs {
		v := make([]float32, 100)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vecs[i] = v
	}
	for b.Loop() {
		DominantDirections(vecs, 100, 4)
	}
}
