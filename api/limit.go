package api

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a token bucket per API key (golang.org/x/time/rate): rate
// requests a second on average, burst at once.
type limiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int
}

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*rate.Limiter{}, sweepAt: minSweep}
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
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	return b.AllowN(now, 1)
}

// minSweep is the bucket count at which full buckets are first dropped.
const minSweep = 1024

// sweep drops the buckets that have refilled (a full bucket is the same as
// none), so keys that stopped calling cost no memory; the next sweep waits
// until the map has doubled.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}
