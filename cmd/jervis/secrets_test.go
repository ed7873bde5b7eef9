package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Git, Jira and Confluence connections with credentials in their URLs and
// in the environment poll a hostile server that fails every request and
// echoes it back (URL, query, Authorization header). Every event a
// client's key can read, /readyz, and every line the process writes are
// searched for the secrets, plain, URL-escaped and in Basic-auth form:
// none is there.
func TestSecretsNeverReachClientsLogsOrEvents(t *testing.T) {
	t.Parallel()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"errorMessages":["no %s for %s (%s)"]}`, r.URL.String(), r.Header.Get("Authorization"), r.URL.User)
	}))
	defer hostile.Close()
	u, _ := url.Parse(hostile.URL)
	secrets := map[string]string{
		"GIT_URL": "gitURLsecret-1a2b3c", "GIT_ENV": "gitENVsecret-4d5e6f",
		"JIRA_URL": "jiraURLsecret-7a8b9c", "JIRA_ENV": "jiraENVsecret-0d1e2f",
		"CONF_URL": "confURLsecret-3a4b5c", "CONF_ENV": "confENVsecret-6d7e8f",
	}
	at := func(user, secret, path string) string {
		return fmt.Sprintf("http://%s:%s@%s%s", user, secret, u.Host, path)
	}
	conf := filepath.Join(t.TempDir(), "jervis.yaml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`connections:
  - {id: git-url, client: acme, type: git, schedule: "@every 1h", git: {url: %q}}
  - {id: git-env, client: acme, type: git, schedule: "@every 1h", git: {url: %q, username: bot, token_env: GIT_TOKEN}}
  - {id: jira, client: acme, type: jira, schedule: "@every 1h", jira: {url: %q, deployment: datacenter, username: jira-bot, token_env: JIRA_TOKEN}}
  - {id: wiki, client: acme, type: confluence, schedule: "@every 1h", confluence: {url: %q, username: wiki-bot, token_env: CONF_TOKEN, spaces: [OPS]}}
`, at("gitter", secrets["GIT_URL"], "/acme/repo.git"), hostile.URL+"/acme/other.git", at("jira-bot", secrets["JIRA_URL"], ""),
		at("wiki-bot", secrets["CONF_URL"], "/wiki"))), 0o644)
	const admin = "jvk_test-admin-key-secrets-0123456789"
	cmd := jervis(t, "serve", "--config", conf, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--roles", "pollers,api", "--log-format", "json")
	cmd.Env = append(cmd.Env, "JERVIS_ADMIN_KEY="+admin, "GIT_TOKEN="+secrets["GIT_ENV"], "JIRA_TOKEN="+secrets["JIRA_ENV"], "CONF_TOKEN="+secrets["CONF_ENV"])
	var stdout, logged bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout = &stdout
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logged.Write(sc.Bytes())
			logged.WriteByte('\n')
			mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "jervis serving" {
				addrCh <- m["addr"].(string)
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	call := func(method, path, key, body string) (int, []byte) {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	call("POST", "/admin/v1/clients", admin, `{"id":"acme"}`)
	_, created := call("POST", "/admin/v1/clients/acme/keys", admin, `{"name":"probe"}`)
	var key struct{ Secret string }
	json.Unmarshal(created, &key)

	// Every event of the client, through its key, until all four polls failed.
	var events string
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+key.Secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			events = string(b)
		}
		cancel()
		if strings.Count(events, "event: poll.failed") >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if n := strings.Count(events, "event: poll.failed"); n < 4 {
		t.Fatalf("%d poll.failed events, want one per connection:\n%s", n, events)
	}
	_, ready := call("GET", "/readyz", "", "")
	_, stats := call("GET", "/admin/v1/stats", admin, "")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	mu.Lock()
	everything := stdout.String() + logged.String() + events + string(ready) + string(stats)
	mu.Unlock()
	for name, s := range secrets {
		for _, form := range []string{s, url.QueryEscape(s), base64.StdEncoding.EncodeToString([]byte(s))} {
			if strings.Contains(everything, form) {
				t.Errorf("%s (%q) leaked", name, form)
			}
		}
		for _, user := range []string{"gitter", "bot", "git", "jira-bot", "wiki-bot"} {
			if basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + s)); strings.Contains(everything, basic) {
				t.Errorf("%s leaked in Basic auth as %s", name, user)
			}
		}
	}
	// The poll failures are told, by the hosts they are about; no address of
	// ours beyond a host name reaches the client.
	if !strings.Contains(events, "127.0.0.1") && !strings.Contains(events, "[address]") {
		t.Errorf("the events say nothing of where the polls failed:\n%s", events)
	}
	if strings.Contains(events, u.Host) {
		t.Errorf("a client reads a server's address and port (%s):\n%s", u.Host, events)
	}
	if t.Failed() {
		t.Logf("captured:\n%s", everything)
	}
}
