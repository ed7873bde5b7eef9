package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile starts the CPU profile --cpuprofile asks for and the
// execution trace --trace asks for.
func (a *app) startProfile() error {
	var stops []func()
	a.stopProfile = func() {
		for _, stop := range stops {
			stop()
		}
	}
	if a.cpuProfile != "" {
		f, err := os.Create(a.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		stops = append(stops, func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	if a.traceFile != "" {
		f, err := os.Create(a.traceFile)
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return fmt.Errorf("--trace: %w", err)
		}
		stops = append(stops, func() {
			trace.Stop()
			f.Close()
		})
	}
	return nil
}

// endProfile writes the CPU profile and the trace out, when they run, and the heap
// profile --memprofile asks for.
func (a *app) endProfile() {
	if a.stopProfile != nil {
		a.stopProfile()
		a.stopProfile = nil
	}
	if !a.heapWritten {
		if err := a.writeHeapProfile(); err != nil {
			fmt.Fprintln(a.stderr, "jervis:", err)
		}
	}
}

// writeHeapProfile writes the heap as it is now (after a collection) to
// --memprofile's file, when it is set.
func (a *app) writeHeapProfile() error {
	if a.memProfile == "" {
		return nil
	}
	f, err := os.Create(a.memProfile)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	a.heapWritten = true
	return nil
}
