package corpus

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// powerIterations are the randomized SVD's passes over the matrix beyond
// the first (Halko, Martinsson and Tropp's "power scheme"): the spectrum of
// a TF-IDF matrix decays slowly, and each pass sharpens the top directions.
const powerIterations = 2

// topDirections returns the top dim right singular vectors of the sparse
// matrix whose rows are rows (over words columns), as a words × dim table,
// row by row: the latent semantic analysis of the rows. Randomized SVD:
// the range of the matrix is found from its product with random vectors
// (ten more than asked), sharpened by power iterations, and the small
// matrix it leaves is decomposed exactly (Jacobi).
func topDirections(rows [][]entry, words, dim int, rng *rand.Rand) []float32 {
	k := min(dim+10, words, len(rows))
	omega := make([]float64, words*k)
	for i := range omega {
		omega[i] = rng.NormFloat64()
	}
	y := mulRows(rows, omega, k) // len(rows) × k
	orthonormalize(y, k, rng)
	for range powerIterations {
		z := mulRowsT(rows, y, words, k) // words × k
		orthonormalize(z, k, rng)
		y = mulRows(rows, z, k)
		orthonormalize(y, k, rng)
	}
	bt := mulRowsT(rows, y, words, k) // (Qᵀ X)ᵀ: words × k
	c := make([]float64, k*k)         // (Qᵀ X)(Qᵀ X)ᵀ
	for j := range words {
		r := bt[j*k : (j+1)*k]
		for a, x := range r {
			if x == 0 {
				continue
			}
			ca := c[a*k : (a+1)*k]
			for b, y := range r {
				ca[b] += x * y
			}
		}
	}
	vals, vecs := symmetricEigen(c, k)
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(vals[b], vals[a]) })
	out := make([]float32, words*dim)
	for c := range min(dim, k) {
		col := order[c]
		sigma := math.Sqrt(max(vals[col], 0))
		if sigma == 0 {
			continue
		}
		for j := range words {
			var s float64
			r := bt[j*k : (j+1)*k]
			for a, x := range r {
				s += x * vecs[a*k+col]
			}
			out[j*dim+c] = float32(s / sigma)
		}
	}
	return out
}

// mulRows is the sparse matrix of rows times m (its columns × k, row by
// row): len(rows) × k.
func mulRows(rows [][]entry, m []float64, k int) []float64 {
	out := make([]float64, len(rows)*k)
	for i, r := range rows {
		o := out[i*k : (i+1)*k]
		for _, e := range r {
			w := float64(e.w)
			for a, x := range m[int(e.word)*k : int(e.word+1)*k] {
				o[a] += w * x
			}
		}
	}
	return out
}

// mulRowsT is the transpose of the sparse matrix of rows times m
// (len(rows) × k): words × k.
func mulRowsT(rows [][]entry, m []float64, words, k int) []float64 {
	out := make([]float64, words*k)
	for i, r := range rows {
		mi := m[i*k : (i+1)*k]
		for _, e := range r {
			w := float64(e.w)
			o := out[int(e.word)*k : int(e.word+1)*k]
			for a, x := range mi {
				o[a] += w * x
			}
		}
	}
	return out
}

// orthonormalize makes the k columns of m (row by row) orthonormal
// (modified Gram-Schmidt, twice: once loses orthogonality on a
// near-degenerate range); a column with nothing left of its own is
// replaced by a random one, made orthogonal to the others.
func orthonormalize(m []float64, k int, rng *rand.Rand) {
	n := len(m) / k
	for c := range k {
		for attempt := 0; ; attempt++ {
			for range 2 {
				for p := range c {
					var dot float64
					for i := range n {
						dot += m[i*k+c] * m[i*k+p]
					}
					for i := range n {
						m[i*k+c] -= dot * m[i*k+p]
					}
				}
			}
			var norm float64
			for i := range n {
				norm += m[i*k+c] * m[i*k+c]
			}
			norm = math.Sqrt(norm)
			if norm > 1e-10 || attempt == 3 {
				for i := range n {
					if norm > 1e-10 {
						m[i*k+c] /= norm
					} else {
						m[i*k+c] = 0
					}
				}
				break
			}
			for i := range n {
				m[i*k+c] = rng.NormFloat64()
			}
		}
	}
}

// symmetricEigen returns the eigenvalues and eigenvectors (the columns of
// the second, k × k row by row) of the symmetric k × k matrix a, by cyclic
// Jacobi rotations. a is overwritten.
func symmetricEigen(a []float64, k int) ([]float64, []float64) {
	v := make([]float64, k*k)
	for i := range k {
		v[i*k+i] = 1
	}
	for sweep := 0; sweep < 100; sweep++ {
		var off, diag float64
		for i := range k {
			diag += a[i*k+i] * a[i*k+i]
			for j := i + 1; j < k; j++ {
				off += a[i*k+j] * a[i*k+j]
			}
		}
		if off <= 1e-24*diag || off == 0 {
			break
		}
		for p := 0; p < k-1; p++ {
			for q := p + 1; q < k; q++ {
				apq := a[p*k+q]
				if math.Abs(apq) < 1e-300 {
					continue
				}
				theta := (a[q*k+q] - a[p*k+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for r := range k { // columns p and q
					arp, arq := a[r*k+p], a[r*k+q]
					a[r*k+p], a[r*k+q] = c*arp-s*arq, s*arp+c*arq
				}
				for r := range k { // rows p and q
					apr, aqr := a[p*k+r], a[q*k+r]
					a[p*k+r], a[q*k+r] = c*apr-s*aqr, s*apr+c*aqr
				}
				for r := range k {
					vrp, vrq := v[r*k+p], v[r*k+q]
					v[r*k+p], v[r*k+q] = c*vrp-s*vrq, s*vrp+c*vrq
				}
			}
		}
	}
	vals := make([]float64, k)
	for i := range k {
		vals[i] = a[i*k+i]
	}
	return vals, v
}
