package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfile starts the CPU profile --cpuprofile asks for.
func (a *app) startProfile() error {
	if a.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(a.cpuProfile)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	a.stopProfile = func() {
		pprof.StopCPUProfile()
		f.Close()
	}
	return nil
}

// endProfile writes the CPU profile out, when one runs.
func (a *app) endProfile() {
	if a.stopProfile != nil {
		a.stopProfile()
		a.stopProfile = nil
	}
}

// heapBytes is the Go heap in use.
func heapBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func numCPU() int     { return runtime.NumCPU() }
func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
