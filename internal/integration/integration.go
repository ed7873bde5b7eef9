// Package integration decides what a test does when the real server it
// needs is not there: it skips on a developer's machine, but fails under
// CI=true, where .ci/run provides every server the integration tests use.
package integration

import (
	"os"
	"testing"
)

// Missing ends the test because what it needs is missing: a failure under
// CI=true (provide says how CI provides it), a skip otherwise (how says
// how to get it).
func Missing(t testing.TB, what, provide, how string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: %s", what, provide)
	}
	t.Skipf("%s is missing (%s); skipping", what, how)
}

// Env returns the environment variable name, which locates a server; when
// it is unset the test ends as Missing.
func Env(t testing.TB, name, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, name, ".ci/run must set it", how)
	}
	return v
}

// Lacks ends the test as skipped because the server that is there cannot
// run it (a capability it lacks), also under CI=true: the case is reported
// as skipped, never as passed.
func Lacks(t testing.TB, server, capability string) {
	t.Helper()
	t.Skipf("%s lacks %s; this case needs a server that has it", server, capability)
}

// Optional returns the environment variable name, which locates a server
// that CI cannot provide (none can be installed where it runs); when it is
// unset the test is skipped, also under CI=true, and says so.
func Optional(t testing.TB, name, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s is not set: no such server here (%s); skipping", name, how)
	}
	return v
}
