// Package linksafety decides whether a link found in a document may be
// fetched, and fetches the ones that may through a guarded HTTP client.
//
// Classify: a link matching a built-in unsafe pattern (credentials in the
// URL, an IP-literal host, an executable or archive download) is BLOCKED; a
// client's block patterns make it UNSAFE and its allow patterns SAFE (a
// domain pattern matches the domain and its subdomains; a pattern with a
// scheme matches URLs that start with it; block wins); anything else is
// UNCERTAIN.
//
// Fetcher: resolves the host itself and refuses loopback, private,
// link-local (cloud metadata at 169.254.169.254 included), unique-local,
// multicast, unspecified and shared (100.64/10) addresses unless the
// Fetcher explicitly allows them; it dials the address it checked, so a
// second DNS answer cannot slip past the check; every redirect (at most
// MaxRedirects) is checked again; the body is capped at MaxBytes, the whole
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
func Classify(rawURL string, patterns []store.LinkPattern) (Verdict, string) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return Blocked, "not an http(s) URL"
	}
	switch {
	case u.User != nil:
		return Blocked, "credentials in the URL"
	case isIPLiteral(u.Hostname()):
		return Blocked, "IP-literal host " + u.Hostname()
	case slices.Contains(riskyExtensions, strings.ToLower(path.Ext(u.Path))):
		return Blocked, "executable or archive download (" + path.Ext(u.Path) + ")"
	}
	if m := actionWords.FindStringSubmatch(strings.ToLower(u.EscapedPath() + "?" + u.RawQuery)); m != nil {
		return Blocked, "an action link (" + m[2] + ")"
	}
	for k := range u.Query() {
		if slices.Contains(secretParams, strings.ToLower(k)) {
			return Blocked, "a credential in the query (" + k + ")"
		}
	}
	host := strings.ToLower(u.Hostname())
	match := func(p string) bool {
		if strings.Contains(p, "://") {
			return strings.HasPrefix(strings.ToLower(rawURL), p)
		}
		return host == p || strings.HasSuffix(host, "."+p)
	}
	for _, p := range patterns {
		if p.Kind == store.LinkBlock && match(p.Pattern) {
			return Unsafe, "block pattern " + p.Pattern
		}
	}
	for _, p := range patterns {
		if p.Kind == store.LinkAllow && match(p.Pattern) {
			return Safe, "allow pattern " + p.Pattern
		}
	}
	return Uncertain, "no pattern matches " + host
}

func isIPLiteral(host string) bool {
	_, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil
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

// allowed reports why addr may not be dialled ("" = it may).
func (f *Fetcher) refuse(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case addr.IsLoopback():
		if f.AllowLoopback {
			return ""
		}
		return "loopback address"
	case addr.IsPrivate():
		return "private address"
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return "link-local address (cloud metadata lives here)"
	case addr.IsMulticast() || addr.IsInterfaceLocalMulticast():
		return "multicast address"
	case addr.IsUnspecified():
		return "unspecified address"
	case netip.MustParsePrefix("100.64.0.0/10").Contains(addr), netip.MustParsePrefix("0.0.0.0/8").Contains(addr):
		return "shared or reserved address"
	}
	return ""
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
