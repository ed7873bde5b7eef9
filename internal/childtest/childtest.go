// Package childtest runs a test binary again as a child process — for tests
// that kill a process (kill -9) and restart it.
package childtest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Main is a TestMain: when the environment variable env names a value, the
// binary is a child and runs fn(value) instead of the tests, exiting 0 when
// it returns nil.
func Main(m *testing.M, env string, fn func(value string) error) {
	if v := os.Getenv(env); v != "" {
		if err := fn(v); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Command returns the test binary as a child with env set to value; its
// stderr is the test's.
func Command(env, value string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	return cmd
}
