// Package api is Jervis's HTTP surface. Every process serves liveness and
// readiness (Routes); the REST API for the UIs is added on top when the api
// role runs.
package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
)

// Check is one dependency readiness waits for.
type Check struct {
	Name string // role:backend, e.g. chunks:weaviate
	// Ping must return promptly when ctx ends.
	Ping func(ctx context.Context) error
}

// CheckResult is one check's outcome in the /readyz body.
type CheckResult struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Health is the /readyz and /healthz body.
type Health struct {
	Status string                 `json:"status"`
	Checks map[string]CheckResult `json:"checks,omitempty"`
}

// HealthPatterns are the patterns Routes registers.
var HealthPatterns = []string{"GET /healthz", "GET /readyz"}

// Routes registers GET /healthz (the process is up) and GET /readyz (every
// check passes within timeout) on mux.
func Routes(mux *http.ServeMux, timeout time.Duration, checks ...Check) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Health{Status: "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		h := Health{Status: "ready", Checks: make(map[string]CheckResult, len(checks))}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range checks {
			wg.Go(func() {
				res := CheckResult{OK: true}
				if err := c.Ping(ctx); err != nil { // anyone may read /readyz
					res = CheckResult{Error: redact.ForClient(err.Error())}
				}
				mu.Lock()
				h.Checks[c.Name] = res
				mu.Unlock()
			})
		}
		wg.Wait()
		code := http.StatusOK
		for _, res := range h.Checks {
			if !res.OK {
				h.Status, code = "unavailable", http.StatusServiceUnavailable
			}
		}
		writeJSON(w, code, h)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Backends runs checks (each within timeout) and reports them as backend
// statuses: the part of Name before ':' is the role, after it the backend.
func Backends(ctx context.Context, timeout time.Duration, checks []Check) []store.BackendStatus {
	out := make([]store.BackendStatus, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		role, backend, _ := strings.Cut(c.Name, ":")
		out[i] = store.BackendStatus{Role: role, Backend: backend, OK: true}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := c.Ping(cctx); err != nil {
				out[i].OK, out[i].Error = false, redact.Text(err.Error())
			}
		})
	}
	wg.Wait()
	return out
}
