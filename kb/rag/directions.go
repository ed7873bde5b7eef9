package rag

import "math"

// directionIterations of the power method per direction.
const directionIterations = 100

// DominantDirections returns the k leading eigenvectors of the uncentred
// second-moment matrix of vecs (those of dim components; others are left
// out), by the power method with deflation: the directions along which
// the vectors reach furthest, the first near their mean.
func DominantDirections(vecs [][]float32, dim, k int) [][]float64 {
	// The upper triangle, then mirrored: the matrix is symmetric.
	m := make([]float64, dim*dim)
	x64 := make([]float64, dim)
	used := 0
	for _, v := range vecs {
		if len(v) != dim {
			continue
		}
		used++
		for j, x := range v {
			x64[j] = float64(x)
		}
		for a, x := range x64 {
			if x == 0 {
				continue
			}
			row := m[a*dim+a : (a+1)*dim]
			for b, y := range x64[a:] {
				row[b] += x * y
			}
		}
	}
	if used == 0 {
		return nil
	}
	for a := range dim {
		for b := a + 1; b < dim; b++ {
			m[b*dim+a] = m[a*dim+b]
		}
	}
	var dirs [][]float64
	y := make([]float64, dim)
	for c := 0; c < min(k, dim); c++ {
		// A start with a component along every axis, the same each time.
		x := make([]float64, dim)
		for j := range x {
			x[j] = 1 + float64(j%7)/7
		}
		orthogonalize(x, dirs)
		if !normalize(x) {
			break
		}
		for range directionIterations {
			for a := range dim {
				s := 0.0
				for b, xb := range x {
					s += m[a*dim+b] * xb
				}
				y[a] = s
			}
			orthogonalize(y, dirs)
			if !normalize(y) {
				return dirs // the vectors span no more directions
			}
			x, y = y, x
		}
		dirs = append(dirs, x)
		y = make([]float64, dim)
	}
	return dirs
}

// orthogonalize removes from x its components along the unit vectors dirs.
func orthogonalize(x []float64, dirs [][]float64) {
	for _, u := range dirs {
		p := 0.0
		for j, uj := range u {
			p += uj * x[j]
		}
		for j, uj := range u {
			x[j] -= p * uj
		}
	}
}

// normalize scales x to unit length; false when it is (about) zero.
func normalize(x []float64) bool {
	n := 0.0
	for _, v := range x {
		n += v * v
	}
	if n < 1e-24 {
		return false
	}
	n = math.Sqrt(n)
	for j := range x {
		x[j] /= n
	}
	return true
}

// RemoveDirections returns q less its components along dirs, unit length;
// q itself when nothing is left of it.
func RemoveDirections(q []float32, dirs [][]float64) []float32 {
	if len(dirs) == 0 {
		return q
	}
	x := make([]float64, len(q))
	for j, v := range q {
		x[j] = float64(v)
	}
	orthogonalize(x, dirs)
	if !normalize(x) {
		return q
	}
	out := make([]float32, len(q))
	for j, v := range x {
		out[j] = float32(v)
	}
	return out
}
