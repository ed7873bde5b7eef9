package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/kb/eval"
)

// serve --demo with rag.backend weaviate, batch writes over gRPC as the
// docker-compose stack has them: the demo corpus's chunks go to a real
// Weaviate, /readyz reports it, and the demo search finds them.
func TestServeDemoOnWeaviate(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	g := integration.Env(t, "TEST_WEAVIATE_GRPC", "export TEST_WEAVIATE_GRPC=$(deploy/weaviate.sh grpc)")
	t.Parallel()
	data := t.TempDir()
	class := fmt.Sprintf("JervisServe%d", time.Now().UnixNano()%1e9)
	cmd := jervis(t, "serve", "--demo", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers,qualifier,api", "--log-format", "json")
	cmd.Env = append(cmd.Env, "JERVIS_RAG_BACKEND=weaviate", "JERVIS_RAG_WEAVIATE_URL="+u, "JERVIS_RAG_WEAVIATE_GRPC="+g, "JERVIS_RAG_WEAVIATE_CLASS="+class)
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	lines := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	addr := waitLog(t, lines, "jervis serving")["addr"].(string)
	go func() {
		for range lines {
		}
	}()
	defer func() { // the class goes with the test
		req, _ := http.NewRequest("DELETE", u+"/v1/schema/"+class, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(fmt.Sprint(ready), "chunks:weaviate") {
		t.Fatalf("readyz: %d %v", resp.StatusCode, ready)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(stdout.String(), "battery+range'\n"); {
		time.Sleep(20 * time.Millisecond)
	}
	keys := bearer.FindAllString(stdout.String(), -1)
	if len(keys) != 2 {
		t.Fatalf("no demo key on stdout:\n%s", stdout.String())
	}
	var found bool
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && !found; time.Sleep(300 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/search?query=battery+range", nil)
		req.Header.Set("Authorization", "Bearer "+keys[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var pack map[string]any
		json.NewDecoder(resp.Body).Decode(&pack)
		resp.Body.Close()
		found = resp.StatusCode == 200 && strings.Contains(strings.ToLower(fmt.Sprint(pack["items"])), "battery range")
	}
	if !found {
		t.Fatal("the demo search over Weaviate found nothing about the battery range")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// eval with rag.backend weaviate: the chunks go to a real Weaviate (the
// client's tenant emptied first), and the figures are Weaviate's search's.
func TestEvalOnWeaviate(t *testing.T) {
	u := integration.Env(t, "TEST_WEAVIATE_URL", "export TEST_WEAVIATE_URL=$(deploy/weaviate.sh start)")
	t.Parallel()
	jira, _, _ := evalCorpus(t)
	class := fmt.Sprintf("JervisEval%d", time.Now().UnixNano()%1e9)
	defer func() {
		req, _ := http.NewRequest("DELETE", u+"/v1/schema/"+class, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	env := []string{"JERVIS_RAG_BACKEND=weaviate", "JERVIS_RAG_WEAVIATE_URL=" + u, "JERVIS_RAG_WEAVIATE_CLASS=" + class}
	for run := range 2 { // the second run starts from an emptied tenant
		code, out, errOut := runCLI(t, env, "eval", "--json", "--check", jira)
		var r eval.Report
		if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
			t.Fatalf("run %d: exit %d %v\n%s\n%s", run, code, err, out, errOut)
		}
		if d := r.Duplicates; !strings.HasPrefix(r.ChunkStore, "weaviate "+u) || d == nil || d.Jervis.RecallAt10 != 1 || d.Similar.RecallAt10 != 1 {
			t.Fatalf("run %d: %s %+v", run, r.ChunkStore, d)
		}
	}
}
