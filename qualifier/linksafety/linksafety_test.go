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

// A redirect to a host that resolves to any refused class is refused when
// it is dialled.
func TestRedirectToEveryRefusedClassIsRefused(t *testing.T) {
	t.Parallel()
	refused := []string{"0.0.0.1", "10.0.0.1", "100.64.0.1", "169.254.169.254", "172.16.0.1", "192.0.0.8", "192.0.2.1", "192.168.0.1",
		"198.18.0.1", "198.51.100.1", "203.0.113.1", "224.0.0.1", "240.0.0.1", "255.255.255.255", "::", "fe80::1", "fc00::1", "fec0::1",
		"ff02::1", "100::1", "2001:db8::1", "3fff::1", "5f00::1", "64:ff9b:1::1", "::ffff:10.0.0.1", "::10.0.0.1", "64:ff9b::a9fe:a9fe",
		"2002:a9fe:a9fe::", "2001:0:a00:1::1"}
	r := resolver{}
	mux := http.NewServeMux()
	for i, a := range refused {
		host := fmt.Sprintf("r%d.test", i)
		r[host] = []netip.Addr{netip.MustParseAddr(a)}
		mux.HandleFunc(fmt.Sprintf("/to/%d", i), func(w http.ResponseWriter, req *http.Request) {
			http.Redirect(w, req, "http://"+host+"/", http.StatusFound)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r["public.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")} // the redirecting server, allowed as loopback
	f := &linksafety.Fetcher{Resolver: r, AllowLoopback: true}
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1")
	for i, a := range refused {
		_, err := f.Fetch(t.Context(), fmt.Sprintf("http://public.test%s/to/%d", port, i))
		if !errors.Is(err, linksafety.ErrRefused) || !strings.Contains(err.Error(), "refused addresses") {
			t.Errorf("redirect to %s: %v", a, err)
		}
	}
}

// Patterns match parsed URLs: hosts on label boundaries (not text prefixes),
// lower-cased, without a trailing dot, IDNA-normalised; user-info tricks
// are blocked; paths and queries are compared percent-decoded.
func TestClassifyResistsConfusion(t *testing.T) {
	t.Parallel()
	patterns := []store.LinkPattern{
		{Kind: store.LinkAllow, Pattern: "https://wiki.acme.com"},
		{Kind: store.LinkAllow, Pattern: "https://docs.acme.com/public"},
		{Kind: store.LinkAllow, Pattern: "*.cdn.acme.com"},
		{Kind: store.LinkAllow, Pattern: "bücher.example"},
		{Kind: store.LinkBlock, Pattern: "secret.acme.com"},
		{Kind: store.LinkAllow, Pattern: "acme.com"},
	}
	for url, want := range map[string]linksafety.Verdict{
		"https://wiki.acme.com/page":                  linksafety.Safe,
		"https://WIKI.Acme.COM/page":                  linksafety.Safe,
		"https://wiki.acme.com./page":                 linksafety.Safe,
		"https://wiki.acme.com.evil.net/page":         linksafety.Uncertain,
		"https://wiki.acme.comevil.net/":              linksafety.Uncertain,
		"http://wiki.acme.com/page":                   linksafety.Safe, // acme.com and its subdomains, any scheme
		"https://wiki.acme.com@evil.net/":             linksafety.Blocked,
		"https://evil.net#@wiki.acme.com":             linksafety.Uncertain,
		"https://secret.acme.com/x":                   linksafety.Unsafe,
		"https://secret.acme.com./x":                  linksafety.Unsafe,
		"https://SECRET.acme.com/x":                   linksafety.Unsafe,
		"https://a.secret.acme.com/x":                 linksafety.Unsafe,
		"https://docs.acme.com/public/guide":          linksafety.Safe,
		"https://docs.acme.com/publicity":             linksafety.Safe, // acme.com allows it, not the path pattern
		"https://img.cdn.acme.com/x.png":              linksafety.Safe,
		"https://xn--bcher-kva.example/buch":          linksafety.Safe,
		"https://bücher.example/buch":                 linksafety.Safe,
		"https://BÜCHER.example./buch":                linksafety.Safe,
		"https://wiki.acme.com/log%69n":               linksafety.Blocked,
		"https://wiki.acme.com/account/%73ign-out":    linksafety.Blocked,
		"https://wiki.acme.com/r?next=%2Funsubscribe": linksafety.Blocked,
		"https://wiki.acme.com/setup%2Eexe":           linksafety.Blocked,
	} {
		if got, why := linksafety.Classify(url, patterns); got != want {
			t.Errorf("Classify(%q) = %s (%s), want %s", url, got, why, want)
		}
	}
	// Only the path pattern, no domain pattern: the path must be under it.
	only := []store.LinkPattern{{Kind: store.LinkAllow, Pattern: "https://docs.acme.com/public"}}
	for url, want := range map[string]linksafety.Verdict{
		"https://docs.acme.com/public":      linksafety.Safe,
		"https://docs.acme.com/public/x":    linksafety.Safe,
		"https://docs.acme.com/publicity":   linksafety.Uncertain,
		"https://docs.acme.com:8443/public": linksafety.Uncertain,
		"http://docs.acme.com/public":       linksafety.Uncertain,
		"https://docs.acme.com/%70ublic/x":  linksafety.Safe,
	} {
		if got, why := linksafety.Classify(url, only); got != want {
			t.Errorf("path pattern: Classify(%q) = %s (%s), want %s", url, got, why, want)
		}
	}
	for p, ok := range map[string]bool{"acme.com": true, "*.acme.com": true, "https://wiki.acme.com/docs": true, "https://*.acme.com": true,
		"ftp://x.test": false, "https://": false, "https://u:p@x.test": false, "acme.com/path": false, "": false, "a b.test": false} {
		if err := linksafety.ValidatePattern(p); (err == nil) != ok {
			t.Errorf("ValidatePattern(%q) = %v", p, err)
		}
	}
}
