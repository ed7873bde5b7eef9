package jira

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gojira "github.com/andygrunwald/go-jira"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/pollers"
)

// Deployments.
const (
	Cloud      = "cloud"      // GET /rest/api/3/search/jql, nextPageToken paging
	DataCenter = "datacenter" // GET /rest/api/2/search, startAt paging
)

// Config configures a Source.
type Config struct {
	BaseURL    string // https://acme.atlassian.net or https://jira.acme.test
	Deployment string // cloud or datacenter (default datacenter)
	Username   string // Cloud: the account e-mail; Data Center: the user (empty with a personal access token)
	Token      string `json:"-"` // API token (Cloud) or password / personal access token (Data Center)
	JQL        string // extra filter, e.g. "project in (OPS, WEB)"
	PageSize   int    // issues per request (default 50)
	HTTPClient *http.Client
}

// Source polls a Jira site with JQL on `updated`, oldest first.
type Source struct {
	cfg    Config
	client *gojira.Client
}

var _ pollers.Source = (*Source)(nil)

// NewSource returns a source for cfg; it does not contact the site.
func NewSource(cfg Config) (*Source, error) {
	cfg.Deployment = cmp.Or(cfg.Deployment, DataCenter)
	cfg.PageSize = cmp.Or(cfg.PageSize, 50)
	if cfg.Deployment != Cloud && cfg.Deployment != DataCenter {
		return nil, fmt.Errorf("jira: deployment %q is not cloud or datacenter", cfg.Deployment)
	}
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 60 * time.Second}
	}
	var hc *http.Client
	switch {
	case cfg.Username != "":
		hc = (&gojira.BasicAuthTransport{Username: cfg.Username, Password: cfg.Token, Transport: base.Transport}).Client()
	case cfg.Token != "":
		hc = (&gojira.BearerAuthTransport{Token: cfg.Token, Transport: base.Transport}).Client()
	default:
		hc = base
	}
	hc.Timeout = base.Timeout
	client, err := gojira.NewClient(hc, cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("jira: %w", err)
	}
	return &Source{cfg: cfg, client: client}, nil
}

// cursor: the JQL lower bound of the paging run in progress, where that run
// is, and the last issue taken (issues at or before it are skipped, since
// JQL compares `updated` by the minute).
type cursor struct {
	Since       string `json:"since,omitempty"` // "2006/01/02 15:04"
	StartAt     int    `json:"startAt,omitempty"`
	PageToken   string `json:"pageToken,omitempty"`
	LastUpdated string `json:"lastUpdated,omitempty"`
	LastKey     string `json:"lastKey,omitempty"`
}

const jiraTime = "2006-01-02T15:04:05.000-0700"

// JQL returns the query of a paging run from since ("" = everything).
func (s *Source) JQL(since string) string {
	var parts []string
	if s.cfg.JQL != "" {
		parts = append(parts, "("+s.cfg.JQL+")")
	}
	if since != "" {
		parts = append(parts, fmt.Sprintf("updated >= %q", since))
	}
	return strings.TrimSpace(strings.Join(parts, " AND ") + " ORDER BY updated ASC, key ASC")
}

type page struct {
	Issues        []json.RawMessage `json:"issues"`
	StartAt       int               `json:"startAt"`
	Total         int               `json:"total"`
	NextPageToken string            `json:"nextPageToken"`
	IsLast        *bool             `json:"isLast"`
}

// Poll implements pollers.Source: one page per call, More while the run
// has pages left.
func (s *Source) Poll(ctx context.Context, cur string) (pollers.Batch, error) {
	var c cursor
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &c); err != nil {
			return pollers.Batch{}, fmt.Errorf("jira: cursor: %w", err)
		}
	}
	q := url.Values{}
	q.Set("jql", s.JQL(c.Since))
	q.Set("maxResults", strconv.Itoa(s.cfg.PageSize))
	q.Set("fields", "*all")
	path := "rest/api/2/search"
	if s.cfg.Deployment == Cloud {
		path = "rest/api/3/search/jql"
		if c.PageToken != "" {
			q.Set("nextPageToken", c.PageToken)
		}
	} else {
		q.Set("startAt", strconv.Itoa(c.StartAt))
	}
	req, err := s.client.NewRequestWithContext(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	if err != nil {
		return pollers.Batch{}, fmt.Errorf("jira: %w", err)
	}
	var p page
	resp, err := s.client.Do(req, &p)
	if err != nil {
		return pollers.Batch{}, s.fail(resp, err)
	}

	var batch pollers.Batch
	last := c
	for i, raw := range p.Issues {
		d, err := Issue(raw)
		if err != nil {
			batch.Documents = append(batch.Documents, unparsable(raw, fmt.Errorf("issue %d of the page: %w", i+1, err)))
			continue
		}
		updated, _ := d.Normalized.Metadata["updated"].(string)
		if !after(updated, d.ExternalID, c.LastUpdated, c.LastKey) {
			continue // seen in an earlier run (same minute)
		}
		batch.Documents = append(batch.Documents, d)
		if after(updated, d.ExternalID, last.LastUpdated, last.LastKey) {
			last.LastUpdated, last.LastKey = updated, d.ExternalID
		}
	}
	next := cursor{Since: c.Since, LastUpdated: last.LastUpdated, LastKey: last.LastKey}
	switch {
	case s.cfg.Deployment == Cloud && p.NextPageToken != "" && (p.IsLast == nil || !*p.IsLast):
		next.PageToken, batch.More = p.NextPageToken, true
	case s.cfg.Deployment == DataCenter && p.StartAt+len(p.Issues) < p.Total && len(p.Issues) > 0:
		next.StartAt, batch.More = p.StartAt+len(p.Issues), true
	default:
		// The run is over: the next starts at the minute of the last issue.
		if t, err := time.Parse(jiraTime, last.LastUpdated); err == nil {
			next.Since = t.Format("2006/01/02 15:04")
		}
	}
	b, _ := json.Marshal(next)
	batch.Cursor = string(b)
	return batch, nil
}

// after reports whether (updated, key) comes after (u2, k2).
func after(updated, key, u2, k2 string) bool {
	if u2 == "" {
		return true
	}
	t1, err1 := time.Parse(jiraTime, updated)
	t2, err2 := time.Parse(jiraTime, u2)
	if err1 != nil || err2 != nil {
		return updated+key > u2+k2
	}
	if !t1.Equal(t2) {
		return t1.After(t2)
	}
	return keyAfter(key, k2)
}

// keyAfter orders issue keys as Jira does: project, then number.
func keyAfter(a, b string) bool {
	pa, na, _ := strings.Cut(a, "-")
	pb, nb, _ := strings.Cut(b, "-")
	if pa != pb {
		return pa > pb
	}
	ia, _ := strconv.Atoi(na)
	ib, _ := strconv.Atoi(nb)
	return ia > ib
}

// fail turns an HTTP failure into an error; 429 and 503 say when to retry.
func (s *Source) fail(resp *gojira.Response, err error) error {
	if resp == nil || resp.Response == nil {
		return fmt.Errorf("jira: %s: %w", redact.URL(s.cfg.BaseURL), err)
	}
	code := resp.StatusCode
	retry := resp.Header.Get("Retry-After")
	err = fmt.Errorf("jira: %s: HTTP %d: %w", redact.URL(s.cfg.BaseURL), code, gojira.NewJiraError(resp, err))
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		d := 30 * time.Second
		if n, perr := strconv.Atoi(retry); perr == nil && n >= 0 {
			d = time.Duration(n) * time.Second
		} else if t, perr := http.ParseTime(retry); perr == nil {
			d = max(0, time.Until(t))
		}
		return &pollers.RetryAfterError{After: d, Err: err}
	}
	return err
}
