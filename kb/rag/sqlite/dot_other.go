//go:build !amd64

package sqlite

// dotsI8 sets out[j] to q · rows[j*stride:(j+1)*stride] in integers.
func dotsI8(q []int16, rows []int8, stride int, out []int32) { dotsI8Go(q, rows, stride, out) }

// dotsScaled is dotsScaledGo.
func dotsScaled(q []int16, rows []int8, stride int, scales []float32, thr float32, out []float32, above []uint8) {
	dotsScaledGo(q, rows, stride, scales, thr, out, above)
}
