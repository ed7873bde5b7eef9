package linksafety_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/qualifier/linksafety"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	patterns := []store.LinkPattern{
		{Kind: store.LinkAllow, Pattern: "wiki.acme.test"},
		{Kind: store.LinkAllow, Pattern: "docs.example.org"},
		{Kind: store.LinkBlock, Pattern: "https://docs.example.org/private/"},
		{Kind: store.LinkBlock, Pattern: "tracker.test"},
	}
	for url, want := range map[string]linksafety.Verdict{
		"https://wiki.acme.test/ops/runbook":           linksafety.Safe,
		"https://team.wiki.acme.test/x":                linksafety.Safe,
		"https://wiki.acme.test.evil.test/x":           linksafety.Uncertain,
		"https://docs.example.org/guide":               linksafety.Safe,
		"https://docs.example.org/private/keys":        linksafety.Unsafe,
		"https://ads.tracker.test/pixel":               linksafety.Unsafe,
		"https://news.example.com/story":               linksafety.Uncertain,
		"https://user:pw@wiki.acme.test/":              linksafety.Blocked,
		"http://10.0.0.1/admin":                        linksafety.Blocked,
		"http://[::1]/":                                linksafety.Blocked,
		"https://wiki.acme.test/download/setup.exe":    linksafety.Blocked,
		"file:///etc/passwd":                           linksafety.Blocked,
		"https://wiki.acme.test/mail/unsubscribe?u=7":  linksafety.Blocked,
		"https://news.example.com/opt-out":             linksafety.Blocked,
		"https://wiki.acme.test/login?next=/x":         linksafety.Blocked,
		"https://app.example.com/orders/9/approve":     linksafety.Blocked,
		"https://app.example.com/reset-password":       linksafety.Blocked,
		"https://app.example.com/r?token=abc":          linksafety.Blocked,
		"https://wiki.acme.test/dl?Signature=x":        linksafety.Blocked,
		"https://wiki.acme.test/loginsights/report":    linksafety.Safe, // a word inside a word is not one
		"https://news.example.com/blog/accepted-talks": linksafety.Uncertain,
	} {
		if got, why := linksafety.Classify(url, patterns); got != want {
			t.Errorf("Classify(%q) = %s (%s), want %s", url, got, why, want)
		}
	}
}

// resolver answers from a table, like DNS would.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func TestFetcherRefusesInternalAddressesAndAbuse(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://internal.acme.test/secret", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 200 { // 200 MB, streamed
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1")
	r := resolver{
		"internal.acme.test": {netip.MustParseAddr("10.1.2.3")},
		"rebind.test":        {netip.MustParseAddr("192.168.1.10")},
		"public.test":        {netip.MustParseAddr("127.0.0.1")}, // the test server, reached only with loopback allowed
	}
	strict := &linksafety.Fetcher{Resolver: r}
	open := &linksafety.Fetcher{Resolver: r, AllowLoopback: true, MaxBytes: 1 << 20}
	for _, tc := range []struct {
		f    *linksafety.Fetcher
		url  string
		want string
	}{
		{strict, "http://127.0.0.1" + port + "/", "loopback"},
		{strict, "http://[::1]" + port + "/", "loopback"},
		{strict, "http://10.0.0.1/", "private"},
		{strict, "http://169.254.169.254/latest/meta-data", "link-local"},
		{strict, "http://rebind.test/", "private"},
		{open, "http://public.test" + port + "/to-private", "private"},
		{open, "http://public.test" + port + "/loop", "more than 5 redirects"},
		{open, "http://public.test" + port + "/huge", "larger than"},
		{open, "http://public.test" + port + "/binary", "content type"},
		{strict, "file:///etc/passwd", "not an http(s) URL"},
		{strict, "http://100.64.1.1/", "shared"},
	} {
		_, err := tc.f.Fetch(t.Context(), tc.url)
		if !errors.Is(err, linksafety.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want a refusal mentioning %q", tc.url, err, tc.want)
		}
	}
}

func TestFetcherFetchesASafePage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Deploy runbook</title><script>evil()</script></head><body><h1>Deploys</h1><p>Ship every second <b>Wednesday</b>. See <a href="https://other.test/next">next</a>.</p></body></html>`)
	}))
	defer srv.Close()
	f := &linksafety.Fetcher{AllowLoopback: true} // this test's own server
	page, err := f.Fetch(t.Context(), srv.URL+"/runbook")
	if err != nil {
		t.Fatal(err)
	}
	if page.Title != "Deploy runbook" || !strings.Contains(page.Text, "# Deploys") || !strings.Contains(page.Text, "**Wednesday**") ||
		!strings.Contains(page.Text, "https://other.test/next") || strings.Contains(page.Text, "evil()") {
		t.Fatalf("page: %+v", page)
	}
}
