package corpus

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// Adam's decay rates (Kingma and Ba's defaults).
const (
	beta1   = 0.9
	beta2   = 0.999
	epsilon = 1e-8
)

// train fits m.vecs so that each title row q[i] is nearer its body row d[i]
// than the other bodies of its batch, and each body nearer its title than
// the batch's other titles (InfoNCE both ways, at o.Temperature), by Adam.
func train(ctx context.Context, m *Model, q, d [][]entry, o Options, rng *rand.Rand) error {
	n := len(q)
	st := newStepper(m, q, d, min(o.Batch, n), float32(o.Temperature))
	mom := make([]float32, len(m.vecs))
	vel := make([]float32, len(m.vecs))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	step := 0
	for epoch := range o.Epochs {
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		var loss float64
		batches := 0
		for start := 0; start+1 < n; start += st.b {
			if err := ctx.Err(); err != nil {
				return err
			}
			idx := order[start:min(start+st.b, n)]
			if len(idx) < 2 {
				break // a lone pair has no negatives
			}
			loss += st.gradient(idx)
			batches++
			step++
			adam(m.vecs, st.grad, mom, vel, float32(o.LearningRate), step)
		}
		if o.Progress != nil && batches > 0 {
			o.Progress(epoch, loss/float64(batches))
		}
	}
	return nil
}

// stepper computes a batch's loss and its gradient by the table, in
// buffers kept from batch to batch.
type stepper struct {
	m      *Model
	q, d   [][]entry
	b      int
	tau    float32
	grad   []float32 // by the table, row by row
	hq, hd []float32 // the batch's vectors, scaled to 1
	nq, nd []float32 // their lengths before
	s, pc  []float32 // similarities (then dLoss/dS), the softmax down each column
	gq, gd []float32
}

func newStepper(m *Model, q, d [][]entry, b int, tau float32) *stepper {
	dim := m.dim
	return &stepper{m: m, q: q, d: d, b: b, tau: tau, grad: make([]float32, len(m.vecs)),
		hq: make([]float32, b*dim), hd: make([]float32, b*dim), nq: make([]float32, b), nd: make([]float32, b),
		s: make([]float32, b*b), pc: make([]float32, b*b), gq: make([]float32, b*dim), gd: make([]float32, b*dim)}
}

// gradient adds the gradient of the loss of the pairs idx (at most b) to
// st.grad and returns the loss.
func (st *stepper) gradient(idx []int) float64 {
	dim, k := st.m.dim, len(idx)
	hq, hd, nq, nd, s, gq, gd := st.hq, st.hd, st.nq, st.nd, st.s, st.gq, st.gd
	parallel(k, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			h := hq[r*dim : (r+1)*dim]
			encode(st.m.vecs, dim, st.q[idx[r]], h)
			nq[r] = normalize(h)
			h = hd[r*dim : (r+1)*dim]
			encode(st.m.vecs, dim, st.d[idx[r]], h)
			nd[r] = normalize(h)
		}
	})
	loss := batchGradient(hq, hd, s, st.pc, k, dim, st.tau)
	// gq = G hd, gd = Gᵀ hq; then back through the scaling to 1.
	parallel(k, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			g := gq[r*dim : (r+1)*dim]
			clear(g)
			for c := range k {
				axpy(g, s[r*k+c], hd[c*dim:(c+1)*dim])
			}
			unscale(g, hq[r*dim:(r+1)*dim], nq[r])
			g = gd[r*dim : (r+1)*dim]
			clear(g)
			for c := range k {
				axpy(g, s[c*k+r], hq[c*dim:(c+1)*dim])
			}
			unscale(g, hd[r*dim:(r+1)*dim], nd[r])
		}
	})
	for r, i := range idx {
		for _, e := range st.q[i] {
			axpy(st.grad[int(e.word)*dim:int(e.word+1)*dim], e.w, gq[r*dim:(r+1)*dim])
		}
		for _, e := range st.d[i] {
			axpy(st.grad[int(e.word)*dim:int(e.word+1)*dim], e.w, gd[r*dim:(r+1)*dim])
		}
	}
	return loss
}

// batchGradient sets s to the gradient of the batch's loss by its
// similarities (k × k, row r a title, column c a body) and returns the
// loss: the mean over both directions of −log softmax(S/τ) at the pair.
func batchGradient(hq, hd, s, pc []float32, k, dim int, tau float32) float64 {
	parallel(k, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			a := hq[r*dim : (r+1)*dim]
			for c := range k {
				s[r*k+c] = dot(a, hd[c*dim:(c+1)*dim]) / tau
			}
		}
	})
	// Column softmax (body c's titles) first, from s as it is.
	for c := range k {
		mx := float32(math.Inf(-1))
		for r := range k {
			mx = max(mx, s[r*k+c])
		}
		var sum float64
		for r := range k {
			e := math.Exp(float64(s[r*k+c] - mx))
			pc[r*k+c] = float32(e)
			sum += e
		}
		for r := range k {
			pc[r*k+c] /= float32(sum)
		}
	}
	var loss float64
	scale := 1 / (2 * float32(k) * tau)
	for r := range k {
		row := s[r*k : (r+1)*k]
		mx := float32(math.Inf(-1))
		for _, x := range row {
			mx = max(mx, x)
		}
		var sum float64
		for c, x := range row {
			e := math.Exp(float64(x - mx))
			row[c] = float32(e)
			sum += e
		}
		for c := range row {
			row[c] /= float32(sum)
		}
		loss -= (math.Log(float64(row[r])+1e-12) + math.Log(float64(pc[r*k+r])+1e-12)) / 2
		for c := range row {
			g := row[c] + pc[r*k+c]
			if c == r {
				g -= 2
			}
			row[c] = g * scale
		}
	}
	return loss / float64(k)
}

// unscale turns g, the gradient by u = h/|h| (n = |h|), into the gradient
// by h: (g − u (u·g)) / n.
func unscale(g, u []float32, n float32) {
	if n == 0 {
		clear(g)
		return
	}
	ug := dot(u, g)
	for i := range g {
		g[i] = (g[i] - u[i]*ug) / n
	}
}

// adam takes one Adam step on w by grad (then cleared).
func adam(w, grad, mom, vel []float32, lr float32, step int) {
	c1 := float32(1 - math.Pow(beta1, float64(step)))
	c2 := float32(1 - math.Pow(beta2, float64(step)))
	parallel(len(w), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := grad[i]
			mom[i] = beta1*mom[i] + (1-beta1)*g
			vel[i] = beta2*vel[i] + (1-beta2)*g*g
			w[i] -= lr * (mom[i] / c1) / (float32(math.Sqrt(float64(vel[i]/c2))) + epsilon)
			grad[i] = 0
		}
	})
}

func dot(a, b []float32) float32 {
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) {
	for i, v := range x {
		y[i] += a * v
	}
}

// parallel runs fn over [0, n) in as many parts as there are CPUs to run
// them (one part, in this goroutine, for small n).
func parallel(n int, fn func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), max(1, n/64))
	if parts <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
