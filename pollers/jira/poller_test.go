package jira_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/jira"
)

// site serves recorded payloads for a sequence of expected requests.
type site struct {
	mu       sync.Mutex
	requests []*http.Request
	respond  func(n int, r *http.Request, w http.ResponseWriter)
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	n := len(s.requests)
	s.mu.Unlock()
	s.respond(n, r, w)
}

func serveFile(w http.ResponseWriter, name string) {
	b, _ := os.ReadFile("testdata/" + name)
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Write(b)
}

func keys(b pollers.Batch) []string {
	var out []string
	for _, d := range b.Documents {
		out = append(out, d.ExternalID)
	}
	return out
}

func TestDataCenterPagingAndRuns(t *testing.T) {
	t.Parallel()
	s := &site{respond: func(n int, r *http.Request, w http.ResponseWriter) {
		if r.URL.Path != "/rest/api/2/search" {
			http.NotFound(w, r)
			return
		}
		switch r.URL.Query().Get("startAt") {
		case "0":
			if strings.Contains(r.URL.Query().Get("jql"), "updated >=") {
				serveFile(w, "dc_next_run.json")
				return
			}
			serveFile(w, "dc_page1.json")
		case "2":
			serveFile(w, "dc_page2.json")
		}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	src, err := jira.NewSource(jira.Config{BaseURL: srv.URL, Username: "jervis", Token: "pat-secret", JQL: "project = OPS", PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	b1, err := src.Poll(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := src.Poll(ctx, b1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	b3, err := src.Poll(ctx, b2.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(append(keys(b1), keys(b2)...), keys(b3)...), ","); got != "OPS-12,OPS-13,OPS-14,OPS-16" || !b1.More || b2.More || b3.More {
		t.Fatalf("issues %s, more %v %v %v", got, b1.More, b2.More, b3.More)
	}
	first := s.requests[0]
	if jql := first.URL.Query().Get("jql"); jql != "(project = OPS) ORDER BY updated ASC, key ASC" {
		t.Fatalf("first JQL %q", jql)
	}
	if u, p, ok := first.BasicAuth(); !ok || u != "jervis" || p != "pat-secret" {
		t.Fatal("no basic auth")
	}
	if jql := s.requests[2].URL.Query().Get("jql"); jql != `(project = OPS) AND updated >= "2026/03/02 10:05" ORDER BY updated ASC, key ASC` {
		t.Fatalf("next run JQL %q", jql)
	}
}

func TestCloudTokenPaging(t *testing.T) {
	t.Parallel()
	s := &site{respond: func(n int, r *http.Request, w http.ResponseWriter) {
		if r.URL.Path != "/rest/api/3/search/jql" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("nextPageToken") == "CAEaAggD" {
			serveFile(w, "cloud_page2.json")
			return
		}
		serveFile(w, "cloud_page1.json")
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	src, _ := jira.NewSource(jira.Config{BaseURL: srv.URL, Deployment: jira.Cloud, Username: "jervis@acme.test", Token: "api-token"})
	b1, err := src.Poll(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := src.Poll(t.Context(), b1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(keys(b1), keys(b2)...), ","); got != "WEB-210,WEB-211,WEB-212" || !b1.More || b2.More {
		t.Fatalf("issues %s", got)
	}
	if !strings.Contains(b1.Documents[0].Normalized.Body, "freeze the cropper") {
		t.Fatalf("ADF body %q", b1.Documents[0].Normalized.Body)
	}
	var c struct{ Since string }
	json.Unmarshal([]byte(b2.Cursor), &c)
	if c.Since != "2026/03/05 16:00" {
		t.Fatalf("cursor %s", b2.Cursor)
	}
}

func TestRateLimitAndServerErrors(t *testing.T) {
	t.Parallel()
	s := &site{respond: func(n int, r *http.Request, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"errorMessages":["Rate limit exceeded."],"errors":{}}`))
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"errorMessages":["Internal server error"],"errors":{}}`))
		default:
			serveFile(w, "dc_next_run.json") // a complete, last page
		}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	src, _ := jira.NewSource(jira.Config{BaseURL: srv.URL, Token: "pat"})
	_, err := src.Poll(t.Context(), "")
	if pollers.RetryAfter(err) != 7*time.Second || !strings.Contains(err.Error(), "Rate limit exceeded") {
		t.Fatalf("429: %v", err)
	}
	if s.requests[0].Header.Get("Authorization") != "Bearer pat" {
		t.Fatalf("auth %q", s.requests[0].Header.Get("Authorization"))
	}
	// Through the scheduler: the 500 is a failed poll, retried with backoff, then it recovers.
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sched, _ := pollers.NewScheduler(pollers.Config{Store: st, BackoffBase: 20 * time.Millisecond},
		pollers.Connection{ID: "jira", Client: "acme", SourceType: store.SourceJira, Schedule: "@every 1h", Source: src})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { sched.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stats, _ := st.Stats(t.Context())
		if stats.Documents["NEW"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no recovery")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	evs, _ := st.ListEvents(t.Context(), store.EventQuery{Aggregate: pollers.AggregatePoll})
	var failed int
	for _, e := range evs {
		if e.Type == pollers.EventPollFailed && strings.Contains(string(e.Data), "HTTP 500") {
			failed++
		}
	}
	if failed != 1 || len(s.requests) != 3 {
		t.Fatalf("failed polls recorded: %d; requests %d", failed, len(s.requests))
	}
	if _, err := jira.NewSource(jira.Config{BaseURL: srv.URL, Deployment: "server"}); err == nil {
		t.Fatal("bad deployment accepted")
	}
}
