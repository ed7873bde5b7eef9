package main

import (
	"fmt"
	"io"
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
	// to starts one of them writing to path, when it is set.
	to := func(flag, path string, start func(io.Writer) error, stop func()) error {
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err == nil {
			if err = start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
		stops = append(stops, func() {
			stop()
			f.Close()
		})
		return nil
	}
	if err := to("cpuprofile", a.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile); err != nil {
		return err
	}
	return to("trace", a.traceFile, trace.Start, trace.Stop)
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
