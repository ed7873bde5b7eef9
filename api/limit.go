package api

import (
	"sync"
	"time"
)

// limiter is a token bucket per API key: rate requests a second on
// average, burst at once.
type limiter struct {
	rate, burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
	sweepAt int
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(max(burst, 1)), buckets: map[string]*bucket{}, sweepAt: minSweep}
}

func (l *limiter) allow(key string) bool {
	if l.rate <= 0 {
		return true
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buckets) >= l.sweepAt {
		l.sweep(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// minSweep is the bucket count at which full buckets are first dropped.
const minSweep = 1024

// sweep drops the buckets that have refilled (a full bucket is the same as
// none), so keys that stopped calling cost no memory; the next sweep waits
// until the map has doubled.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}
