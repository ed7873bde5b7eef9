package confluence_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/confluence"
)

func TestPollerPagesAndRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reqs []*http.Request
	mux := http.NewServeMux()
	mux.HandleFunc("GET /wiki/rest/api/content/search", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r)
		n := len(reqs)
		mu.Unlock()
		switch {
		case n == 3:
			w.Header().Set("Retry-After", "4")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"statusCode":429,"message":"Rate limited"}`))
			return
		case r.URL.Query().Get("cursor") != "":
			b, _ := os.ReadFile("testdata/search_page2.json")
			w.Write(b)
		default:
			b, _ := os.ReadFile("testdata/search_page1.json")
			w.Write(b)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	src, err := confluence.NewSource(confluence.Config{BaseURL: srv.URL + "/wiki", Username: "jervis@acme.test", Token: "tok", Spaces: []string{"OPS"}, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := src.Poll(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := src.Poll(t.Context(), b1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(b1.Documents) != 2 || len(b2.Documents) != 1 || !b1.More || b2.More || b2.Documents[0].Normalized.Title != "On-call handbook" {
		t.Fatalf("pages: %d %d more %v %v", len(b1.Documents), len(b2.Documents), b1.More, b2.More)
	}
	if cql := reqs[0].URL.Query().Get("cql"); cql != `type = page AND space in ("OPS") ORDER BY lastmodified ASC` {
		t.Fatalf("cql %q", cql)
	}
	if u, p, ok := reqs[0].BasicAuth(); !ok || u != "jervis@acme.test" || p != "tok" || !strings.Contains(reqs[1].URL.RawQuery, "cursor=_f_MjA") {
		t.Fatalf("auth or next link: %v %s", ok, reqs[1].URL)
	}
	_, err = src.Poll(t.Context(), b2.Cursor)
	if pollers.RetryAfter(err) != 4*time.Second || !strings.Contains(err.Error(), "Rate limited") {
		t.Fatalf("429: %v", err)
	}
	if cql := reqs[2].URL.Query().Get("cql"); cql != `type = page AND space in ("OPS") AND lastmodified >= "2026/03/03 10:00" ORDER BY lastmodified ASC` {
		t.Fatalf("next run cql %q", cql)
	}
	// The next run returns the first page again: all seen, nothing new.
	b4, err := src.Poll(t.Context(), b2.Cursor)
	if err != nil || len(b4.Documents) != 0 {
		t.Fatalf("seen pages came back: %d %v", len(b4.Documents), err)
	}
	if _, err := src.Poll(t.Context(), `{"next":"https://evil.test/rest/api/content/search"}`); err == nil || !strings.Contains(err.Error(), "leaves") {
		t.Fatalf("foreign next link: %v", err)
	}
}
