// Package redact removes secrets from text that leaves the process: logs,
// errors returned by the API, stored events, `jervis status`, /readyz.
//
// One rule for every URL or DSN that can carry a secret (URL): the
// userinfo goes whole (a token often stands where the user name would),
// and so do the values of query parameters whose names say they hold a
// secret (password, token, secret, key, signature, credential, session —
// tlsCertificateKeyFilePassword too). Text applies it to every URL in free
// text (an error message), and a Redactor also removes the secret values
// the process knows (a token read from the environment, echoed back in a
// server's error page) in plain and in Basic-auth form. ForClient goes
// further for what a client's key may read: our servers appear by host
// name only, IP addresses not at all, and stack traces are cut.
package redact

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask stands in for what was removed.
const Mask = "REDACTED"

// urlRE finds URLs and DSNs in text: a scheme, "://", and what follows up
// to a space, a quote or a bracket.
var urlRE = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'<>`]+")

// userinfoRE and queryRE find the userinfo and the secret query values of
// a URL that url.Parse refuses (a MongoDB URI with several hosts).
var (
	userinfoRE = regexp.MustCompile(`://[^/?#\s@]*@`)
	queryRE    = regexp.MustCompile(`([?&;])([^=&#;\s]+)=([^&#;\s]*)`)
)

// secretParam reports whether a query parameter's name says it holds a
// secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "token", "secret", "credential", "signature", "session", "cookie"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, "key") || slices.Contains([]string{"sig", "auth", "code", "jwt"}, n)
}

// URL returns raw with its secrets replaced by Mask: the whole userinfo,
// and the values of secret query parameters. Text that is not a URL comes
// back as it is; a URL that does not parse loses its userinfo all the same.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		raw = userinfoRE.ReplaceAllString(raw, "://"+Mask+"@")
		return queryRE.ReplaceAllStringFunc(raw, func(kv string) string {
			m := queryRE.FindStringSubmatch(kv)
			if secretParam(m[2]) {
				return m[1] + m[2] + "=" + Mask
			}
			return kv
		})
	}
	changed := false
	if u.User != nil {
		u.User = url.User(Mask)
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			if secretParam(k) {
				for i := range vs {
					vs[i] = Mask
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}

// Text returns s with every URL in it passed through URL.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlRE.ReplaceAllStringFunc(s, URL)
}

var (
	ipv4RE  = regexp.MustCompile(`\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5})?\b`)
	ipv6RE  = regexp.MustCompile(`\[[0-9A-Fa-f:.%]+\](?::[0-9]{1,5})?`)
	stackRE = regexp.MustCompile(`(?s)\n?goroutine [0-9]+ \[.*`)
)

// ForClient returns s as a client's key may read it: secrets removed (Text),
// every URL reduced to its scheme and host name (no port, path or query: no
// address of our servers beyond the host name), IP addresses replaced, and
// a Go stack trace cut.
func ForClient(s string) string {
	s = stackRE.ReplaceAllString(s, " [stack trace removed]")
	s = urlRE.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return URL(raw)
		}
		host := u.Hostname()
		if ipv4RE.MatchString(host) || strings.Contains(host, ":") {
			host = "[address]"
		}
		return u.Scheme + "://" + host
	})
	s = ipv6RE.ReplaceAllString(s, "[address]")
	return ipv4RE.ReplaceAllString(s, "[address]")
}

// Redactor is Text plus the secret values the process knows. The zero value
// and nil redact by the URL rule only.
type Redactor struct {
	secrets []string
}

// minSecret is the shortest value removed by value: shorter ones would
// also match ordinary words.
const minSecret = 6

// New returns a Redactor that also removes these secret values wherever
// they appear, and their Basic-auth forms with any of users.
func New(secrets []string, users ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		r.secrets = append(r.secrets, s, base64.StdEncoding.EncodeToString([]byte(s)), url.QueryEscape(s))
		for _, u := range append(users, "", "git", "x-access-token", "oauth2") {
			r.secrets = append(r.secrets, base64.StdEncoding.EncodeToString([]byte(u+":"+s)))
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) }) // longest first
	r.secrets = slices.Compact(r.secrets)
	return r
}

// Text returns s without secrets: the known values first, then the URL
// rule.
func (r *Redactor) Text(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Mask)
			}
		}
	}
	return Text(s)
}

// ForClient returns s without secrets, as ForClient does.
func (r *Redactor) ForClient(s string) string { return ForClient(r.Text(s)) }

// Handler wraps h so that every log record's message and string, error
// and stringer attributes pass through the Redactor.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{h: h, r: r} }

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Text(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, len(attrs))
		for i, x := range attrs {
			out[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.Text(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.Text(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(out), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}
