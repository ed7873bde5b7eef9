// Package linksafety decides whether a link found in a document may be
// fetched, and fetches the ones that may through a guarded HTTP client.
//
// Classify: a link matching a built-in unsafe pattern (credentials in the
// URL, an IP-literal host, an executable or archive download, an action
// link) is BLOCKED; a client's block patterns make it UNSAFE and its allow
// patterns SAFE (block wins); anything else is UNCERTAIN. Links and
// patterns are compared parsed, never as text: a host name pattern matches
// the host and its subdomains on label boundaries, "*.acme.com" only the
// subdomains, a URL pattern its scheme, host, port and the paths under its
// path (ValidatePattern); hosts lower-cased, IDNA-normalised and without a
// trailing dot, paths and queries percent-decoded.
//
// Fetcher: resolves the host itself and refuses every address that is not
// globally reachable by the IANA IPv4 and IPv6 special-purpose registries
// (loopback, private, link-local with the cloud metadata service,
// unique-local, site-local, CGNAT, benchmarking, documentation, reserved,
// multicast, …), after unwrapping the IPv4 address an IPv6 one carries
// (IPv4-mapped and -compatible, NAT64, 6to4, Teredo: 64:ff9b::a9fe:a9fe is
// the metadata service); it dials the address it checked, so a second DNS
// answer cannot slip past the check; every redirect (at most MaxRedirects)
// is checked again when it is dialled; the body is capped at MaxBytes, the whole
// fetch at Timeout, and only HTML and text content types are read. HTML is
// converted to Markdown-flavoured text.
package linksafety

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"golang.org/x/net/idna"

	"github.com/jervis-dev/jervis/internal/store"
)

// Verdict is what Classify decides.
type Verdict string

// Verdicts.
const (
	Blocked   Verdict = "BLOCKED"   // built-in unsafe pattern: never fetched
	Unsafe    Verdict = "UNSAFE"    // a block pattern of the client
	Safe      Verdict = "SAFE"      // an allow pattern of the client: fetched
	Uncertain Verdict = "UNCERTAIN" // nothing says: the policy decides
)

// ErrRefused wraps every refusal of the fetcher; the message says why.
var ErrRefused = errors.New("link refused")

// actionWords are path or query words of links that act when followed —
// unsubscribe, sign in or out, reset a password, confirm, approve — and
// which a fetch must never follow on the recipient's behalf.
var actionWords = regexp.MustCompile(`(^|[/?&=._-])(unsubscribe|opt-?out|log-?out|sign-?out|log-?in|sign-?in|password|reset|confirm|verify|approve|accept|decline|oauth|authori[sz]e)([/?&=._-]|$)`)

// secretParams are query parameters that carry a credential.
var secretParams = []string{"token", "access_token", "auth", "sig", "signature", "apikey", "api_key", "key", "code", "session"}

var riskyExtensions = []string{".exe", ".msi", ".dmg", ".scr", ".bat", ".cmd", ".ps1", ".jar", ".apk", ".zip", ".rar", ".7z", ".iso"}

// Classify decides what may happen to rawURL for a client with patterns.
// It reads the URL as a browser would follow it: the host lower-cased,
// IDNA-normalised and without a trailing dot, the path and query
// percent-decoded, so that neither `secret.acme.com.` nor `/log%69n`
// slips past a check.
func Classify(rawURL string, patterns []store.LinkPattern) (Verdict, string) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return Blocked, "not an http(s) URL"
	}
	host, err := NormalizeHost(u.Hostname())
	if err != nil {
		return Blocked, "host " + err.Error()
	}
	decodedQuery, err := url.QueryUnescape(u.RawQuery)
	if err != nil {
		decodedQuery = u.RawQuery
	}
	switch {
	case u.User != nil:
		return Blocked, "credentials in the URL"
	case isIPLiteral(host):
		return Blocked, "IP-literal host " + host
	case slices.Contains(riskyExtensions, strings.ToLower(path.Ext(u.Path))):
		return Blocked, "executable or archive download (" + path.Ext(u.Path) + ")"
	}
	if m := actionWords.FindStringSubmatch(strings.ToLower(u.Path + "?" + decodedQuery)); m != nil {
		return Blocked, "an action link (" + m[2] + ")"
	}
	for k := range u.Query() {
		if slices.Contains(secretParams, strings.ToLower(k)) {
			return Blocked, "a credential in the query (" + k + ")"
		}
	}
	for _, p := range patterns {
		if p.Kind == store.LinkBlock && matchPattern(p.Pattern, u, host) {
			return Unsafe, "block pattern " + p.Pattern
		}
	}
	for _, p := range patterns {
		if p.Kind == store.LinkAllow && matchPattern(p.Pattern, u, host) {
			return Safe, "allow pattern " + p.Pattern
		}
	}
	return Uncertain, "no pattern matches " + host
}

// NormalizeHost returns a host name as links are compared by it: lower-
// cased, IDNA-normalised to its ASCII form (bücher.example →
// xn--bcher-kva.example) and without a trailing dot.
func NormalizeHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if isIPLiteral(h) {
		return h, nil
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid host name: %v", h, err)
	}
	return a, nil
}

// ValidatePattern checks a link pattern: a host name ("acme.com": it and
// its subdomains), "*.acme.com" (its subdomains only), or an http(s) URL
// prefix ("https://wiki.acme.com/docs": that scheme, host and port, and
// paths under /docs; its host may start with "*.").
func ValidatePattern(p string) error {
	p = strings.TrimSpace(p)
	if strings.Contains(p, "://") {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			return fmt.Errorf("pattern %q is not an http(s) URL with a host (and no credentials)", p)
		}
		_, err = NormalizeHost(strings.TrimPrefix(u.Hostname(), "*."))
		return err
	}
	if p == "" || strings.ContainsAny(p, "/?#@ ") {
		return fmt.Errorf("pattern %q is neither a host name nor an http(s) URL", p)
	}
	_, err := NormalizeHost(strings.TrimPrefix(p, "*."))
	return err
}

// matchHost matches a normalised host against a pattern's: equal, or with
// "*.suffix" a subdomain of suffix, on label boundaries; with subdomains,
// a plain name matches its subdomains too.
func matchHost(pattern, host string, subdomains bool) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		rest, err := NormalizeHost(rest)
		return err == nil && strings.HasSuffix(host, "."+rest)
	}
	pattern, err := NormalizeHost(pattern)
	if err != nil {
		return false
	}
	return host == pattern || subdomains && strings.HasSuffix(host, "."+pattern)
}

// matchPattern matches a link (parsed, its host normalised) against one
// pattern (see ValidatePattern). A URL pattern is matched by its parts, not
// as a prefix of the text: https://wiki.acme.com does not match
// https://wiki.acme.com.evil.net/.
func matchPattern(p string, u *url.URL, host string) bool {
	p = strings.TrimSpace(p)
	if !strings.Contains(p, "://") {
		return matchHost(p, host, true)
	}
	pu, err := url.Parse(p)
	if err != nil || !strings.EqualFold(pu.Scheme, u.Scheme) || !matchHost(strings.ToLower(pu.Hostname()), host, false) {
		return false
	}
	if effectivePort(pu) != effectivePort(u) {
		return false
	}
	prefix := strings.TrimSuffix(strings.ToLower(pu.Path), "/")
	linkPath := strings.ToLower(u.Path)
	return prefix == "" || linkPath == prefix || strings.HasPrefix(linkPath, prefix+"/")
}

func isIPLiteral(host string) bool {
	_, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// Resolver looks up a host's addresses (net.DefaultResolver does).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Fetcher is the guarded HTTP client. The zero value is usable and allows
// no internal address.
type Fetcher struct {
	MaxBytes     int64         // default 5 MiB
	Timeout      time.Duration // default 20s
	MaxRedirects int           // default 5
	// AllowLoopback lets a test fetch from its own httptest server.
	AllowLoopback bool
	Resolver      Resolver // default net.DefaultResolver
}

// Page is a fetched page.
type Page struct {
	URL         string // after redirects
	ContentType string
	Title       string
	Text        string // Markdown-flavoured text
}

// refuse says why addr may not be dialled ("" = it may): every address
// that is not globally reachable (nonGlobal), loopback only when the
// Fetcher allows it (tests).
func (f *Fetcher) refuse(addr netip.Addr) string {
	if f.AllowLoopback && addr.Unmap().IsLoopback() {
		return ""
	}
	return nonGlobal(addr)
}

// dial resolves host and connects to the first address that passes.
func (f *Fetcher) dial(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := f.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("%w: resolve %s: %v", ErrRefused, host, err)
		}
	}
	var reasons []string
	for _, a := range addrs {
		if why := f.refuse(a); why != "" {
			reasons = append(reasons, a.String()+": "+why)
			continue
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
	}
	return nil, fmt.Errorf("%w: %s resolves only to refused addresses (%s)", ErrRefused, host, strings.Join(reasons, "; "))
}

var textTypes = []string{"text/html", "application/xhtml+xml", "text/plain", "text/markdown"}

// Fetch gets rawURL under the guard.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Page, error) {
	maxBytes := cmp.Or(f.MaxBytes, 5<<20)
	maxRedirects := cmp.Or(f.MaxRedirects, 5)
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(f.Timeout, 20*time.Second))
	defer cancel()
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return Page{}, fmt.Errorf("%w: %q is not an http(s) URL", ErrRefused, rawURL)
	}
	client := &http.Client{
		Transport: &http.Transport{DialContext: f.dial, Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConns: 1, ResponseHeaderTimeout: cmp.Or(f.Timeout, 20*time.Second)},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrRefused, maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: redirect to %s", ErrRefused, req.URL.Scheme)
			}
			return nil // the address is checked again when it is dialled
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	req.Header.Set("User-Agent", "jervis-link-fetcher/1")
	req.Header.Set("Accept", "text/html, text/plain;q=0.9, */*;q=0.1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return Page{}, unwrapURL(err)
		}
		return Page{}, fmt.Errorf("fetch %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Page{}, fmt.Errorf("fetch %s: HTTP %d", rawURL, resp.StatusCode)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !slices.Contains(textTypes, ct) {
		return Page{}, fmt.Errorf("%w: content type %q is not one of %v", ErrRefused, ct, textTypes)
	}
	if resp.ContentLength > maxBytes {
		return Page{}, fmt.Errorf("%w: %d bytes, more than %d", ErrRefused, resp.ContentLength, maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return Page{}, fmt.Errorf("fetch %s: %w", rawURL, err)
	}
	if int64(len(body)) > maxBytes {
		return Page{}, fmt.Errorf("%w: body larger than %d bytes", ErrRefused, maxBytes)
	}
	page := Page{URL: resp.Request.URL.String(), ContentType: ct, Text: string(body)}
	if ct == "text/html" || ct == "application/xhtml+xml" {
		page.Title = htmlTitle(page.Text)
		if page.Text, err = htmltomarkdown.ConvertString(page.Text); err != nil {
			return Page{}, fmt.Errorf("convert %s: %w", rawURL, err)
		}
	}
	page.Text = strings.TrimSpace(page.Text)
	return page, nil
}

// unwrapURL drops *url.Error's "Get ...: " prefix around a refusal.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func htmlTitle(h string) string {
	lower := strings.ToLower(h)
	i := strings.Index(lower, "<title>")
	j := strings.Index(lower, "</title>")
	if i < 0 || j < i {
		return ""
	}
	return strings.TrimSpace(h[i+7 : j])
}
