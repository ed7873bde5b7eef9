package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// statusOf reads `jervis status --json`; zero Stats while there is no
// database yet.
func statusOf(t *testing.T, data string) store.Stats {
	t.Helper()
	code, out, _ := runCLI(t, nil, "status", "--json", "--data", data)
	var st store.Stats
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	return st
}

func TestImportDemoCorpusTwice(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	code, out, errOut := runCLI(t, nil, "import", "--data", data, "--client", "demo", "../../deploy/demo/email", "../../deploy/demo/jira", "../../deploy/demo/confluence")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// 291 emails, 36 issues in 3 search responses, 12 pages.
	if !strings.Contains(out, "imported 306 files into demo: 339 documents (339 new versions, 0 unchanged), 0 unparsable, 0 skipped") {
		t.Fatalf("summary: %s", out)
	}
	st := statusOf(t, data)
	// Links are per document (replies quote without links): 217 in all,
	// each recorded with its document under the default link policy, its
	// task made DONE (qualifier.LinkTriage).
	links := st.TasksByKind["LINK_PROCESSING"]["DONE"]
	if st.Documents["INDEXED"] != 339 || st.Documents["QUARANTINED"] != 0 || st.TasksByKind["DATA_PROCESSING"]["NEW"] != 339 || links != 217 {
		t.Fatalf("after import: documents %v tasks %v", st.Documents, st.TasksByKind)
	}
	code, out, _ = runCLI(t, nil, "import", "--data", data, "--client", "demo", "../../deploy/demo/email", "../../deploy/demo/jira", "../../deploy/demo/confluence")
	if code != 0 || !strings.Contains(out, "339 documents (0 new versions, 339 unchanged)") {
		t.Fatalf("second import: %s", out)
	}
	if again := statusOf(t, data); again.TasksByKind["LINK_PROCESSING"]["DONE"] != links || again.Documents["INDEXED"] != 339 {
		t.Fatalf("second import changed counts: %v %v", again.Documents, again.TasksByKind)
	}
}

func TestServeDemo(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	run := func() store.Stats {
		cmd := jervis(t, "serve", "--demo", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers", "--log-format", "json")
		lines := jsonLogs(t, cmd)
		defer cmd.Process.Kill()
		waitLog(t, lines, "jervis serving")
		go func() {
			for range lines { // keep the pipe drained
			}
		}()
		var st store.Stats
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			st = statusOf(t, data)
			if st.Documents["INDEXED"] > 0 && st.Documents["NEW"]+st.Documents["INDEXING"] == 0 {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve --demo: %v", err)
		}
		return st
	}
	first := run()
	// 339 documents from files, 70 commits and 2 branches from git.
	if first.Documents["INDEXED"] != 411 || first.DocumentsBySource["GIT"]["INDEXED"] != 72 {
		t.Fatalf("demo: %v %v", first.Documents, first.DocumentsBySource)
	}
	if second := run(); second.Documents["INDEXED"] != 411 || second.Tasks["NEW"] != first.Tasks["NEW"] {
		t.Fatalf("restart re-imported: %v", second.Documents)
	}
}

func TestReprocessCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "demo", "../../deploy/demo/jira"); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	code, out, errOut := runCLI(t, nil, "reprocess", "--data", data, "--client", "demo", "--dry-run", "--wipe")
	if code != 0 || !strings.Contains(out, "demo: 36 documents selected; would send back (dry run) 36 documents to the indexers and 0 tasks") {
		t.Fatalf("dry run: %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, nil, "reprocess", "--data", data, "--client", "demo", "--source-type", "JIRA", "--since", "2020-01-01T00:00:00Z")
	if code != 0 || !strings.Contains(out, "36 documents selected; sent back 36 documents") {
		t.Fatalf("reprocess: %d %s", code, out)
	}
	if st := statusOf(t, data); st.Documents["NEW"] != 36 {
		t.Fatalf("after reprocess: %v", st.Documents)
	}
	for _, bad := range [][]string{{"--client", "demo", "--since", "yesterday"}, {"--client", "demo", "--wipe", "--source-type", "JIRA"}, {}} {
		if code, _, errOut := runCLI(t, nil, append([]string{"reprocess", "--data", data}, bad...)...); code == 0 || errOut == "" {
			t.Fatalf("%v accepted", bad)
		}
	}
}
