package sqlite

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotsI8AVX2(q []int16, rows []int8, stride int, out []int32)

//go:noescape
func dotsScaledAVX2(q []int16, rows []int8, stride int, scales []float32, thr float32, out []float32, above []uint8)

// dotsI8 sets out[j] to q · rows[j*stride:(j+1)*stride] in integers, with
// AVX2 where the CPU has it. stride must be a multiple of 16.
func dotsI8(q []int16, rows []int8, stride int, out []int32) {
	if stride%16 != 0 || len(q) < stride || len(rows) < len(out)*stride {
		panic("sqlite: dotsI8: bad stride or short vectors")
	}
	if hasAVX2 && stride > 0 {
		dotsI8AVX2(q, rows, stride, out)
		return
	}
	dotsI8Go(q, rows, stride, out)
}

// dotsScaled is dotsScaledGo, with AVX2 where the CPU has it. stride must
// be a multiple of 16.
func dotsScaled(q []int16, rows []int8, stride int, scales []float32, thr float32, out []float32, above []uint8) {
	if stride%16 != 0 || len(q) < stride || len(rows) < len(out)*stride || len(scales) < len(out) || len(above) < len(out)/4 {
		panic("sqlite: dotsScaled: bad stride or short vectors")
	}
	if !hasAVX2 || stride == 0 {
		dotsScaledGo(q, rows, stride, scales, thr, out, above)
		return
	}
	// Whole groups of four in the kernel; the last len(out)%4 rows
	// through dotsI8's, scaled here.
	whole := len(out) &^ 3
	dotsScaledAVX2(q, rows, stride, scales, thr, out[:whole], above)
	var d [3]int32
	tail := d[:len(out)-whole]
	dotsI8AVX2(q, rows[whole*stride:], stride, tail)
	for j, x := range tail {
		out[whole+j] = float32(x) * scales[whole+j]
	}
}
