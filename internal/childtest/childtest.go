// Package childtest runs a test binary again as a child process — for tests
// that kill a process (kill -9) and restart it.
package childtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
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

// KillWhen kills the running child with SIGKILL as soon as ready says so
// (asked every 5 ms, for a minute at most) and fails the test if the child
// had already finished by itself.
func KillWhen(t testing.TB, cmd *exec.Cmd, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !ready(); {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) {
		t.Fatalf("child finished before the kill: %v", err)
	}
}
