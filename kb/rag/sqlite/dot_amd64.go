package sqlite

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotsAVX2(q, flat []float32, dim int, out []float32)

// dots sets out[j] to q · flat[j*dim:(j+1)*dim], with AVX2 and FMA where the
// CPU has them.
func dots(q, flat []float32, dim int, out []float32) {
	if len(q) < dim || len(flat) < len(out)*dim {
		panic("sqlite: dots: short vectors")
	}
	if hasAVX2 && dim > 0 {
		dotsAVX2(q, flat, dim, out)
		return
	}
	dotsGo(q, flat, dim, out)
}
