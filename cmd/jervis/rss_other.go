//go:build !linux

package main

import "runtime"

// peakRSS is the memory the Go runtime obtained from the system (no peak
// RSS figure is read on this platform).
func peakRSS() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Sys)
}

// cpuSeconds is not read on this platform.
func cpuSeconds() float64 { return 0 }

// ioCalls is not read on this platform.
func ioCalls() (IOCalls, bool) { return IOCalls{}, false }
