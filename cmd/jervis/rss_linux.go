//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// peakRSS is the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// cpuSeconds is the CPU time the process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// ioCalls reads the process's I/O so far from /proc/self/io: the bytes
// passed to its read and write calls and how many calls (rchar, wchar,
// syscr, syscw: files, pipes and sockets alike, whether or not the disk
// was reached). ok is false when the file cannot be read.
func ioCalls() (c IOCalls, ok bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return c, false
	}
	fields := map[string]*float64{"rchar": &c.ReadBytes, "wchar": &c.WrittenBytes, "syscr": &c.ReadCalls, "syscw": &c.WriteCalls}
	seen := 0
	for line := range strings.Lines(string(b)) {
		name, v, found := strings.Cut(strings.TrimSpace(line), ": ")
		if p := fields[name]; found && p != nil {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return c, false
			}
			*p, seen = n, seen+1
		}
	}
	return c, seen == len(fields)
}
