package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
)

// jervis import and status with store.backend mongo: the demo Jira issues
// and Confluence pages go
// into the MongoDB store (the knowledge base stays in the data directory),
// every document is indexed into its tasks, and importing again duplicates
// nothing.
func TestImportDemoIntoMongo(t *testing.T) {
	uri := integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
	t.Parallel()
	db := fmt.Sprintf("jervis_cmd_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		if s, err := mongo.Open(context.Background(), mongo.Options{URI: uri, Database: db}); err == nil {
			_ = s.Drop(context.Background())
			_ = s.Close()
		}
	})
	env := []string{"JERVIS_STORE_BACKEND=mongo", "JERVIS_STORE_MONGO_URI=" + uri, "JERVIS_STORE_MONGO_DATABASE=" + db}
	data := t.TempDir()
	imp := func() string {
		code, out, errOut := runCLI(t, env, "import", "--data", data, "--client", "demo", "../../deploy/demo/jira", "../../deploy/demo/confluence")
		if code != 0 {
			t.Fatalf("import exit %d: %s", code, errOut)
		}
		return out
	}
	status := func() store.Stats {
		code, out, errOut := runCLI(t, env, "status", "--json", "--data", data)
		var st store.Stats
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status exit %d: %s %s", code, out, errOut)
		}
		return st
	}
	if out := imp(); !strings.Contains(out, "48 documents (48 new versions, 0 unchanged)") {
		t.Fatalf("first import: %s", out)
	}
	st := status()
	if st.Documents["INDEXED"] != 48 || st.TasksByKind["DATA_PROCESSING"]["NEW"] != 48 || st.TasksByKind["LINK_PROCESSING"]["DONE"] == 0 { // links recorded with their documents
		t.Fatalf("after import: documents %v tasks %v", st.Documents, st.TasksByKind)
	}
	if !strings.Contains(fmt.Sprint(st.Backends), "store mongo true") {
		t.Fatalf("status backends: %+v", st.Backends)
	}
	if out := imp(); !strings.Contains(out, "48 documents (0 new versions, 48 unchanged)") {
		t.Fatalf("second import: %s", out)
	}
	if again := status(); again.Documents["INDEXED"] != 48 || again.TasksByKind["LINK_PROCESSING"]["DONE"] != st.TasksByKind["LINK_PROCESSING"]["DONE"] || again.TasksByKind["DATA_PROCESSING"]["NEW"] != 48 {
		t.Fatalf("second import changed counts: %v %v", again.Documents, again.TasksByKind)
	}
}

// serve on the MongoDB store: it says which server it uses (without a
// password), /readyz checks it, the change-stream watcher reports what the
// server offers, and it stops cleanly.
func TestServeOnMongo(t *testing.T) {
	uri := integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
	t.Parallel()
	db := fmt.Sprintf("jervis_serve_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		if s, err := mongo.Open(context.Background(), mongo.Options{URI: uri, Database: db}); err == nil {
			_ = s.Drop(context.Background())
			_ = s.Close()
		}
	})
	// A URI with a password: whatever the server answers, the password is in
	// no message.
	u, _ := url.Parse(uri)
	u.User = url.UserPassword("jervis", "s3cret-password")
	_, out, errOut := runCLI(t, []string{"JERVIS_STORE_BACKEND=mongo", "JERVIS_STORE_MONGO_URI=" + u.String(), "JERVIS_STORE_MONGO_DATABASE=" + db}, "status", "--data", t.TempDir())
	if strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("the password reached the output:\n%s%s", out, errOut)
	}
	cmd := jervis(t, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--roles", "indexers,qualifier,api", "--log-format", "json")
	cmd.Env = append(cmd.Env, "JERVIS_STORE_BACKEND=mongo", "JERVIS_STORE_MONGO_URI="+uri, "JERVIS_STORE_MONGO_DATABASE="+db)
	var (
		mu   sync.Mutex
		msgs []string
	)
	raw := jsonLogs(t, cmd)
	lines := make(chan map[string]any, 64)
	go func() { // every message, also those waitLog reads past
		defer close(lines)
		for m := range raw {
			mu.Lock()
			msgs = append(msgs, fmt.Sprint(m["msg"]))
			mu.Unlock()
			lines <- m
		}
	}()
	defer cmd.Process.Kill()
	open := waitLog(t, lines, "store open")
	if open["backend"] != "mongo" || open["server"] == nil {
		t.Fatalf("store open: %v", open)
	}
	addr := waitLog(t, lines, "jervis serving")["addr"].(string)
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"store:mongo":{"ok":true}`) {
		t.Fatalf("readyz %d: %s", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	s, err := mongo.Open(t.Context(), mongo.Options{URI: uri, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	server, _ := s.ServerVersion(t.Context())
	said := strings.Contains(strings.Join(msgs, "\n"), "no change streams")
	if strings.HasPrefix(server, "FerretDB") && !said { // a standalone MongoDB has none either; a replica set has them
		t.Fatalf("%s has no change streams, and serve did not say so: %q", server, msgs)
	}
}
