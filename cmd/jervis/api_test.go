package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var bearer = regexp.MustCompile(`jvk_[A-Za-z0-9_-]{43}`)

func TestServeDemoAnswersSearchOverTheAPI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cmd := jervis(t, "serve", "--demo", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers,qualifier,api", "--log-format", "json")
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	lines := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	addr := waitLog(t, lines, "jervis serving")["addr"].(string)
	var logged lockedBuffer
	go func() {
		for m := range lines {
			fmt.Fprintln(&logged, m)
		}
	}()
	// stdout and the log come through separate pipes: the keys are printed
	// before the serving line but may be copied into the buffer after it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(stdout.String(), "/api/v1/search?query=battery+range'\n"); {
		time.Sleep(20 * time.Millisecond)
	}
	keys := bearer.FindAllString(stdout.String(), -1)
	if len(keys) != 2 || !strings.Contains(stdout.String(), "curl -s -H 'Authorization: Bearer "+keys[1]+"' 'http://"+addr+"/api/v1/search?query=battery+range'") {
		t.Fatalf("want an admin key and a demo curl on stdout, got:\n%s", stdout.String())
	}
	admin, demo := keys[0], keys[1]
	get := func(key, path string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	var pack map[string]any
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		code, out := get(demo, "/api/v1/search?query=battery+range")
		if code != http.StatusOK {
			t.Fatalf("search: %d %v", code, out)
		}
		if pack = out; strings.Contains(strings.ToLower(fmt.Sprint(out["items"])), "battery range") {
			break
		}
	}
	if !strings.Contains(strings.ToLower(fmt.Sprint(pack["items"])), "battery range") {
		t.Fatalf("the demo search found nothing about the battery range: %v", pack)
	}
	if code, out := get(admin, "/admin/v1/clients"); code != http.StatusOK || !strings.Contains(fmt.Sprint(out), "demo") {
		t.Fatalf("admin clients: %d %v", code, out)
	}
	if code, _ := get(admin, "/api/v1/search?query=battery"); code != http.StatusForbidden {
		t.Fatalf("admin key on a client route: %d", code)
	}
	// The CLI over the API: the key decides the client.
	server := "http://" + addr
	if code, out, errOut := runCLI(t, nil, "search", "--server", server, "--key", demo, "battery range"); code != 0 || !strings.Contains(strings.ToLower(out), "battery range") {
		t.Fatalf("search --server: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, []string{"JERVIS_API_KEY=" + admin}, "status", "--server", server, "--json"); code != 0 || !strings.Contains(out, `"INDEXED": `) || !strings.Contains(out, `"demo": {`) {
		t.Fatalf("status --server: %d %s %s", code, out, errOut)
	}
	// A dry run counts the documents indexed by then: the search above
	// found one, not necessarily all 411.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, st := get(admin, "/admin/v1/stats"); fmt.Sprint(st["documents"]) == "map[INDEXED:411 INDEXING:0 NEW:0 QUARANTINED:0]" {
			break
		}
	}
	if code, out, errOut := runCLI(t, nil, "reprocess", "--server", server, "--key", admin, "--client", "demo", "--dry-run"); code != 0 ||
		!strings.Contains(out, "demo: 411 documents selected; would send back (dry run) 411 documents") {
		t.Fatalf("reprocess --server: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "status", "--server", server, "--key", demo); code == 0 || !strings.Contains(errOut, "server: 403 forbidden") {
		t.Fatalf("status with a client key: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "search", "--server", server, "x"); code == 0 || !strings.Contains(errOut, "JERVIS_API_KEY") {
		t.Fatalf("search --server without a key: %d %s", code, errOut)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if strings.Contains(logged.String(), "jvk_") {
		t.Fatalf("a key secret reached the log:\n%s", logged.String())
	}
}

func TestPollNowOverTheAPI(t *testing.T) {
	t.Parallel()
	data, drop := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(drop, "one.md"), []byte("# One\n\nThe first note."), 0o644)
	conf := filepath.Join(t.TempDir(), "jervis.yaml")
	os.WriteFile(conf, []byte(fmt.Sprintf("connections:\n  - id: drop\n    client: acme\n    type: filedrop\n    schedule: \"@every 1h\"\n    filedrop:\n      path: %s\n", drop)), 0o644)
	const admin = "jvk_test-admin-key-0123456789"
	cmd := jervis(t, "serve", "--config", conf, "--data", data, "--listen", "127.0.0.1:0", "--roles", "pollers,indexers,api", "--log-format", "json")
	cmd.Env = append(cmd.Env, "JERVIS_ADMIN_KEY="+admin)
	lines := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	addr := waitLog(t, lines, "jervis serving")["addr"].(string)
	go func() {
		for range lines {
		}
	}()
	indexed := func(n int64) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if statusOf(t, data).Documents["INDEXED"] == n {
				return true
			}
		}
		return false
	}
	if !indexed(1) {
		t.Fatal("the first poll did not index one.md")
	}
	os.WriteFile(filepath.Join(drop, "two.md"), []byte("# Two\n\nThe second note."), 0o644)
	post := func(path string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/admin/v1/connections/drop/poll"); code != http.StatusAccepted {
		t.Fatalf("poll now: %d", code)
	}
	if !indexed(2) {
		t.Fatal("poll now did not pick up two.md (the schedule is hourly)")
	}
	if code := post("/admin/v1/connections/nope/poll"); code != http.StatusNotFound {
		t.Fatalf("unknown connection: %d", code)
	}
	// The poll, the indexing and the queues show in the metrics (admin only).
	get := func(key string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("metrics without a key: %d", code)
	}
	// A poll is counted when it has finished, which may be just after its
	// documents were indexed: read the metrics until they have caught up.
	wants := []string{
		`jervis_polls_total{connection="drop",result="finished"} 2`,
		`jervis_poll_documents_total{connection="drop",kind="new_versions"} 2`,
		`jervis_documents{client="acme",source="FILE",state="INDEXED"} 2`,
		`jervis_tasks{client="acme",kind="DATA_PROCESSING",state="NEW"} 2`,
		`jervis_job_duration_seconds_count{outcome="succeeded",stage="indexer"} 2`,
		`jervis_oldest_waiting_seconds{queue="tasks.NEW"}`,
		`jervis_store_up 1`,
	}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, text := get(admin)
		if code != http.StatusOK {
			t.Fatalf("metrics: %d", code)
		}
		missing = slices.DeleteFunc(slices.Clone(wants), func(w string) bool { return strings.Contains(text, w) })
		if len(missing) == 0 {
			break
		}
	}
	if len(missing) > 0 {
		t.Errorf("metrics lack %q", missing)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}
