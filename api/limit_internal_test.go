package api

import (
	"fmt"
	"testing"
	"time"
)

// Buckets of keys that stopped calling are dropped once they have refilled;
// a bucket still draining is kept, and its key stays limited.
func TestLimiterForgetsRefilledBuckets(t *testing.T) {
	t.Parallel()
	l := newLimiter(1e9, 2) // refilled a nanosecond after each call
	for i := range 5000 {
		l.allow(fmt.Sprint("key-", i))
	}
	if n := len(l.buckets); n >= 5000 {
		t.Fatalf("%d buckets kept for 5,000 keys", n)
	}
	slow := newLimiter(0.001, 1) // one request, then nothing for 1,000 s
	if !slow.allow("busy") || slow.allow("busy") {
		t.Fatal("burst of one")
	}
	for i := range 3000 {
		slow.allow(fmt.Sprint("other-", i))
	}
	time.Sleep(time.Millisecond)
	if slow.allow("busy") {
		t.Fatal("a sweep forgot a key that is still limited")
	}
}
