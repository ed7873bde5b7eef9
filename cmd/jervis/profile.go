package main

import (
	"fmt"
	"os"
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
