package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/config"
)

// remote talks to a running server's REST API, for the commands given
// --server. The key comes from --key or JERVIS_API_KEY (better: it stays out
// of the shell history and the process list).
type remote struct {
	base *url.URL
	key  string
	hc   *http.Client
}

// remote returns the server client when --server is set, or nil.
func (a *app) remote() (*remote, error) {
	if a.server == "" {
		return nil, nil
	}
	u, err := url.Parse(a.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server: %q is not an http(s) URL", a.server)
	}
	key := a.key
	if key == "" {
		key, _ = config.LookupEnv("JERVIS_API_KEY", a.environ)
	}
	if key == "" {
		return nil, errors.New("--server needs an API key: --key or JERVIS_API_KEY")
	}
	return &remote{base: u, key: key, hc: &http.Client{Timeout: 2 * time.Minute}}, nil
}

// do sends one request; a JSON answer goes into out, an error answer comes
// back as an error with the server's code and message.
func (r *remote) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	p, query, _ := strings.Cut(path, "?")
	u := r.base.JoinPath(p)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", r.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("server: %d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("server: %s", resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
