package confluence

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/pollers"
)

// Config configures a Source.
type Config struct {
	BaseURL    string   // https://acme.atlassian.net/wiki (Cloud) or https://wiki.acme.test (Data Center)
	Username   string   // Cloud: the account e-mail; empty with a personal access token
	Token      string   `json:"-"`
	Spaces     []string // space keys; empty = all the account can see
	PageSize   int      // default 25
	HTTPClient *http.Client
}

// Source polls pages changed since the cursor with CQL on lastmodified.
type Source struct {
	cfg  Config
	base *url.URL
	http *http.Client
}

var _ pollers.Source = (*Source)(nil)

// NewSource returns a source for cfg; it does not contact the site.
func NewSource(cfg Config) (*Source, error) {
	u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("confluence: base URL %q is not a URL", cfg.BaseURL)
	}
	cfg.PageSize = cmp.Or(cfg.PageSize, 25)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Source{cfg: cfg, base: u, http: hc}, nil
}

type cursor struct {
	Since    string `json:"since,omitempty"` // "2006/01/02 15:04"
	Next     string `json:"next,omitempty"`  // the run's next page link
	LastWhen string `json:"lastWhen,omitempty"`
	LastID   string `json:"lastId,omitempty"`
}

// CQL returns the query of a run from since ("" = everything).
func (s *Source) CQL(since string) string {
	parts := []string{"type = page"}
	if len(s.cfg.Spaces) > 0 {
		q := make([]string, len(s.cfg.Spaces))
		for i, sp := range s.cfg.Spaces {
			q[i] = strconv.Quote(sp)
		}
		parts = append(parts, "space in ("+strings.Join(q, ", ")+")")
	}
	if since != "" {
		parts = append(parts, fmt.Sprintf("lastmodified >= %q", since))
	}
	return strings.Join(parts, " AND ") + " ORDER BY lastmodified ASC"
}

type searchPage struct {
	Results []json.RawMessage `json:"results"`
	Links   struct {
		Next string `json:"next"`
	} `json:"_links"`
}

// Poll implements pollers.Source: one page per call.
func (s *Source) Poll(ctx context.Context, cur string) (pollers.Batch, error) {
	var c cursor
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &c); err != nil {
			return pollers.Batch{}, fmt.Errorf("confluence: cursor: %w", err)
		}
	}
	target := s.base.JoinPath("rest/api/content/search")
	q := url.Values{}
	q.Set("cql", s.CQL(c.Since))
	q.Set("limit", strconv.Itoa(s.cfg.PageSize))
	q.Set("expand", "body.storage,version,space,ancestors")
	target.RawQuery = q.Encode()
	if c.Next != "" {
		next, err := s.resolve(c.Next)
		if err != nil {
			return pollers.Batch{}, err
		}
		target = next
	}
	var p searchPage
	if err := s.get(ctx, target, &p); err != nil {
		return pollers.Batch{}, err
	}
	var batch pollers.Batch
	last := c
	for i, raw := range p.Results {
		d, err := Page(raw)
		if err != nil {
			batch.Documents = append(batch.Documents, unparsable(raw, fmt.Errorf("result %d of the page: %w", i+1, err)))
			continue
		}
		when := d.ObservedAt
		if !laterThan(when, d.ExternalID, c.LastWhen, c.LastID) {
			continue // seen in an earlier run (same minute)
		}
		batch.Documents = append(batch.Documents, d)
		if laterThan(when, d.ExternalID, last.LastWhen, last.LastID) {
			last.LastWhen, last.LastID = when.Format(time.RFC3339Nano), d.ExternalID
		}
	}
	next := cursor{Since: c.Since, LastWhen: last.LastWhen, LastID: last.LastID}
	if p.Links.Next != "" && len(p.Results) > 0 {
		next.Next, batch.More = p.Links.Next, true
	} else if t, err := time.Parse(time.RFC3339Nano, last.LastWhen); err == nil {
		next.Since = t.UTC().Format("2006/01/02 15:04")
	}
	b, _ := json.Marshal(next)
	batch.Cursor = string(b)
	return batch, nil
}

func laterThan(when time.Time, id, lastWhen, lastID string) bool {
	if lastWhen == "" {
		return true
	}
	lw, err := time.Parse(time.RFC3339Nano, lastWhen)
	if err != nil || !when.Equal(lw) {
		return err != nil || when.After(lw)
	}
	a, _ := strconv.Atoi(id)
	b, _ := strconv.Atoi(lastID)
	return a > b
}

// resolve turns a next link (relative to the site, as Confluence returns
// it) into a URL on the configured host only.
func (s *Source) resolve(link string) (*url.URL, error) {
	u, err := url.Parse(link)
	if err != nil {
		return nil, fmt.Errorf("confluence: next link %q: %w", link, err)
	}
	if u.IsAbs() {
		if u.Host != s.base.Host {
			return nil, fmt.Errorf("confluence: next link %q leaves %s", link, s.base.Host)
		}
		return u, nil
	}
	// Links are relative to the context path (/wiki on Cloud).
	out := *s.base
	out.Path = strings.TrimSuffix(s.base.Path, "/") + "/" + strings.TrimPrefix(u.Path, strings.TrimSuffix(s.base.Path, "/")+"/")
	out.Path = strings.ReplaceAll(out.Path, "//", "/")
	out.RawQuery = u.RawQuery
	return &out, nil
}

func (s *Source) get(ctx context.Context, u *url.URL, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("confluence: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	switch {
	case s.cfg.Username != "":
		req.SetBasicAuth(s.cfg.Username, s.cfg.Token)
	case s.cfg.Token != "":
		req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("confluence: %s: %w", s.base.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("confluence: %s: read: %w", s.base.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		err := fmt.Errorf("confluence: %s: HTTP %d: %s", s.base.Host, resp.StatusCode, msg)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			d := 30 * time.Second
			if n, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && n >= 0 {
				d = time.Duration(n) * time.Second
			}
			return &pollers.RetryAfterError{After: d, Err: err}
		}
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("confluence: %s: decode: %w", s.base.Host, err)
	}
	return nil
}
