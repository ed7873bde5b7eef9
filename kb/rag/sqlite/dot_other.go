//go:build !amd64

package sqlite

// dots sets out[j] to q · flat[j*dim:(j+1)*dim].
func dots(q, flat []float32, dim int, out []float32) { dotsGo(q, flat, dim, out) }
