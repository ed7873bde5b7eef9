package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		base int
		want int
	}{
		{0, 50, 100},           // before the first collection
		{0, 150, 150},          //
		{64 * mib, 50, 200},    // a small heap still grows by 128 MiB
		{100 * mib, 50, 128},   //
		{128 * mib, 50, 100},   // MinHeadroom is all of it
		{192 * mib, 50, 67},    // 128 MiB of headroom
		{256 * mib, 50, 50},    // the base from here on
		{2048 * mib, 50, 50},   //
		{512 * mib, 20, 25},    // 128 MiB, above the base
		{100 * mib, 150, 150},  // a base above the floor is left as it is
		{64 * mib, 150, 200},   // one under it is raised to it
		{4096 * mib, 100, 100}, //
		{1 << 10, 50, 10000},   // a heap of a few bytes: bounded
		{1, 50, 10000},         //
	} {
		if got := Percent(c.live, c.base); got != c.want {
			t.Errorf("Percent(%d MiB, %d) = %d, want %d", c.live/mib, c.base, got, c.want)
		}
	}
}

// Started, the tuner sets the percent at once and again after collections;
// stopped, it leaves the percent alone. Not parallel: the percent is the
// process's.
func TestStartSetsThePercentAfterEachCollection(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	defer Stop()

	runtime.GC() // something live measured
	debug.SetGCPercent(30)
	Start(50)
	want := Percent(liveBytes(), 50) // a test's heap is far under MinHeadroom: over 100
	if Base() != 50 || Current() != want || want <= 100 {
		t.Fatalf("after Start: base %d, current %d, want %d", Base(), Current(), want)
	}
	if got := debug.SetGCPercent(30); got != want {
		t.Fatalf("percent %d after Start, want %d", got, want)
	}
	// Something else set 30; the next collections set it back.
	tuner.mu.Lock()
	tuner.set = 30
	tuner.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; {
		runtime.GC()
		time.Sleep(time.Millisecond) // cleanups run on their own goroutine
		if Current() > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no collection set the percent again")
		}
	}
	if got, want := debug.SetGCPercent(100), Current(); got != want {
		t.Fatalf("percent %d after collections, want %d", got, want)
	}

	Stop()
	debug.SetGCPercent(30)
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 30 || Base() != 0 || Current() != 0 {
		t.Fatalf("stopped: percent %d, base %d, current %d; want 30, 0, 0", got, Base(), Current())
	}
}
