// Package gctune sets the Go collector's percent (runtime/debug.SetGCPercent)
// from what is live after each collection: the heap may grow by a base
// percent of what is live (config gc_percent), but by at least MinHeadroom.
//
// Why: a base below 100 keeps a large process near 1.5 times what it holds
// (the 100,000-document bench went under 1 GiB with 50), but on a small heap
// it only makes the collector run twice as often for a few megabytes
// (jervis eval on the dev corpora lost about 8 % of its documents/s with 50).
// Go's default (100) does the same on a heap smaller than MinHeadroom: the
// dev corpora's runs hold about 60 MB, and collecting every 60 MB was 7 %
// of their pipeline's CPU (BENCHMARKS.md, fortieth round).
// A fixed floor on the headroom is what Go's collector has no knob for; as
// the collector tuners of other Go services do (a cleanup on an object that
// dies with each cycle), the percent is set again after every collection.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MinHeadroom is the least the heap may grow by between collections, in
// bytes: below 2 × MinHeadroom live the percent is above a base of 50,
// below MinHeadroom live above 100. 128 MiB: the dev corpora's runs (about
// 60 MB live) collect every 128 MiB, and the 100,000-document run, whose
// peak RSS comes while 200–400 MB are live, as with 50 (256 MiB put that
// peak 77 MiB higher, 956 MiB; BENCHMARKS.md, sixteenth round).
const MinHeadroom = 128 << 20

// maxPercent bounds the percent of a heap far under MinHeadroom (a heap of
// under 1.3 MB live grows by less than MinHeadroom).
const maxPercent = 10000

// Percent is the collector's percent for live bytes of live heap and a base
// percent: base of live, but at least MinHeadroom (100 before anything was
// measured live).
func Percent(live uint64, base int) int {
	if live == 0 {
		return max(base, 100)
	}
	// MinHeadroom in percent of live, rounded up; above base as long as
	// MinHeadroom is more than base percent of live.
	p := (uint64(MinHeadroom)*100 + live - 1) / live
	return max(base, int(min(p, maxPercent)))
}

var tuner struct {
	mu   sync.Mutex
	base int // 0: off
	gen  int // which Start the live cleanup belongs to
	set  int // the percent last set
}

// sentinel dies with each collection (nothing keeps it); its cleanup sets
// the percent again and makes the next one. It holds a pointer so that it is
// not one of the tiny allocations the runtime packs together.
type sentinel struct {
	_ *int
	_ [8]byte
}

// Start sets the percent from base (10..1000, validated by the caller) and
// what is live now, and again after every collection until Stop or the next
// Start (which re-bases it).
func Start(base int) {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	tuner.base = base
	tuner.gen++
	tuner.set = 0 // set it whatever it was
	tune()
	arm(tuner.gen)
}

// Stop stops setting the percent and leaves it as it is (GOGC decides it).
func Stop() {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	tuner.base = 0
	tuner.gen++
}

// Base returns the base percent Start was given, 0 when stopped.
func Base() int {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	return tuner.base
}

// Current returns the percent last set, 0 when stopped.
func Current() int {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	if tuner.base == 0 {
		return 0
	}
	return tuner.set
}

func arm(gen int) {
	runtime.AddCleanup(&sentinel{}, collected, gen)
}

// collected runs after the collection that found the sentinel dead.
func collected(gen int) {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	if gen != tuner.gen || tuner.base == 0 {
		return // stopped or re-based: that Start armed its own
	}
	tune()
	arm(gen)
}

// tune sets the percent for what the last collection left live; tuner.mu
// held.
func tune() {
	p := Percent(liveBytes(), tuner.base)
	if p != tuner.set {
		debug.SetGCPercent(p)
		tuner.set = p
	}
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// liveBytes is the heap the last collection marked live (0 before the
// first).
func liveBytes() uint64 {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}
