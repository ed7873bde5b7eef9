package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/api"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	storeErr := errors.New("sqlite: ping /data/jervis.db: disk I/O error")
	for _, tc := range []struct {
		name     string
		path     string
		checks   []api.Check
		code     int
		status   string
		failures map[string]string
	}{
		{"alive", "/healthz", nil, 200, "ok", nil},
		{"ready", "/readyz", []api.Check{{Name: "store", Ping: func(context.Context) error { return nil }}}, 200, "ready", nil},
		{"store down", "/readyz", []api.Check{
			{Name: "store", Ping: func(context.Context) error { return storeErr }},
			{Name: "graph", Ping: func(context.Context) error { return nil }},
		}, 503, "unavailable", map[string]string{"store": storeErr.Error()}},
		{"slow check times out", "/readyz", []api.Check{{Name: "store", Ping: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}}, 503, "unavailable", map[string]string{"store": context.DeadlineExceeded.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			api.Routes(mux, 50*time.Millisecond, tc.checks...)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var h api.Health
			if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || h.Status != tc.status {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, h.Status, tc.code, tc.status)
			}
			for name, msg := range tc.failures {
				if h.Checks[name].OK || h.Checks[name].Error != msg {
					t.Errorf("check %s = %+v, want error %q", name, h.Checks[name], msg)
				}
			}
			if len(tc.checks) > 0 && len(h.Checks) != len(tc.checks) {
				t.Errorf("reported %d checks, want %d", len(h.Checks), len(tc.checks))
			}
		})
	}
	// Only GET is served.
	mux := http.NewServeMux()
	api.Routes(mux, time.Second)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz = %d", rec.Code)
	}
}
