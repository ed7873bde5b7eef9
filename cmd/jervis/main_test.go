package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/gctune"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
)

// The test binary doubles as the jervis binary for tests that need a real
// process (signals): with childEnv set it runs main with the JSON-encoded
// arguments. The variable is not JERVIS_* so config does not reject it.
const childEnv = "JERVISTEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			panic(err)
		}
		os.Exit(run(context.Background(), args, os.Stdout, os.Stderr, os.Environ()))
	}
	os.Exit(m.Run())
}

func jervis(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	return cmd
}

// runCLI runs one command line in-process.
func runCLI(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb, env)
	return code, out.String(), errb.String()
}

func TestServeStartsAnswersAndStopsOnSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "fresh")
			cmd := jervis(t, "serve", "--data", data, "--listen", "127.0.0.1:0", "--log-format", "json")
			lines := jsonLogs(t, cmd)
			defer cmd.Process.Kill()
			addr := waitLog(t, lines, "jervis serving")["addr"].(string)

			for path, want := range map[string]string{"/healthz": `"status":"ok"`, "/readyz": `"store:sqlite":{"ok":true}`} {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
					t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
				}
			}
			if _, err := os.Stat(filepath.Join(data, sqlite.FileName)); err != nil {
				t.Fatalf("database not created in the empty data directory: %v", err)
			}

			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitLog(t, lines, "stopped")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit after %s: %v", sig, err)
			}
			// The default soft timeout is 10s; an idle server stops at once.
			if took := time.Since(sent); took > 5*time.Second {
				t.Fatalf("shutdown took %s", took)
			}
		})
	}
}

func TestServeIndexesStoredDocuments(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(data, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	doc := store.Document{Client: "demo", SourceType: store.SourceEmail, ExternalID: "m1", Raw: []byte("x"),
		Normalized: store.Normalized{Title: "Plan", Body: "See https://wiki.demo.test/plan and https://wiki.demo.test/plan#top."}}
	if _, _, err := s.PutDocument(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cmd := jervis(t, "serve", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		_, out, _ = runCLI(t, nil, "status", "--json", "--data", data)
		if strings.Contains(out, `"INDEXED": 1`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	var st store.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Documents["INDEXED"] != 1 || st.TasksByKind["DATA_PROCESSING"]["NEW"] != 1 || st.TasksByKind["LINK_PROCESSING"]["DONE"] != 1 { // the link recorded with its document
		t.Fatalf("after serving: %s", out)
	}
}

// jsonLogs starts cmd and returns its stderr's JSON log lines.
func jsonLogs(t *testing.T, cmd *exec.Cmd) <-chan map[string]any {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	return lines
}

func waitLog(t *testing.T, lines <-chan map[string]any, msg string) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("process exited before logging %q", msg)
			}
			if m["msg"] == msg {
				return m
			}
			if m["level"] == "ERROR" {
				t.Fatalf("error logged: %v", m)
			}
		case <-timeout:
			t.Fatalf("no %q log line", msg)
		}
	}
}

func TestStatusJSONIsKeyedByStateNames(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(data, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"a", "b"} {
		if _, _, err := s.PutDocument(t.Context(), store.Document{Client: "demo", SourceType: store.SourceJira, ExternalID: ext, Raw: []byte(ext)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.EnqueueTasks(t.Context(), store.Task{Kind: store.KindData, Client: "demo", SourceDoc: "a"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	code, out, errOut := runCLI(t, nil, "status", "--json", "--data", data)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Documents         map[string]int64            `json:"documents"`
		Tasks             map[string]int64            `json:"tasks"`
		DocumentsBySource map[string]map[string]int64 `json:"documentsBySource"`
		TasksByClient     map[string]map[string]int64 `json:"tasksByClient"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if got.Documents["NEW"] != 2 || got.Tasks["NEW"] != 1 || got.Tasks["READY_FOR_GPU"] != 0 || len(got.Tasks) != len(store.TaskStates) ||
		got.DocumentsBySource["JIRA"]["NEW"] != 2 || got.TasksByClient["demo"]["NEW"] != 1 {
		t.Fatalf("status: %s", out)
	}
	code, out, _ = runCLI(t, nil, "status", "--data", data)
	if code != 0 || !strings.Contains(out, "QUALIFICATION_IN_PROGRESS") || !strings.Contains(out, "JIRA") {
		t.Fatalf("text status:\n%s", out)
	}
}

func TestStartupErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badKey := filepath.Join(dir, "bad-key.yaml")
	os.WriteFile(badKey, []byte("store:\n  sqlite:\n    busy_timout: 1s\n"), 0o600)
	badType := filepath.Join(dir, "bad-type.yaml")
	os.WriteFile(badType, []byte("shutdown_timeout: 10\n"), 0o600)
	corrupt := filepath.Join(dir, "corrupt")
	os.MkdirAll(corrupt, 0o750)
	os.WriteFile(filepath.Join(corrupt, sqlite.FileName), bytes.Repeat([]byte("garbage "), 1000), 0o600)

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown key", nil, []string{"serve", "--config", badKey}, []string{"store.sqlite.busy_timout", "line 3"}},
		{"wrong type", nil, []string{"serve", "--config", badType}, []string{"shutdown_timeout", "not a duration"}},
		{"unknown env", []string{"JERVIS_LISTN=:1"}, []string{"serve"}, []string{"JERVIS_LISTN"}},
		{"bad flag value", nil, []string{"serve", "--log-level", "loud"}, []string{"log.level", "loud"}},
		{"bad role", nil, []string{"serve", "--roles", "api,gpu"}, []string{"roles", "gpu"}},
		{"bad listen", nil, []string{"serve", "--listen", "nonsense", "--data", t.TempDir()}, []string{"listen"}},
		{"corrupt database", nil, []string{"serve", "--data", corrupt, "--listen", "127.0.0.1:0"}, []string{filepath.Join(corrupt, sqlite.FileName), "corrupted", "backup"}},
		{"status without database", nil, []string{"status", "--data", filepath.Join(dir, "none")}, []string{"no database at", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runCLI(t, tc.env, tc.args...)
			if code == 0 {
				t.Fatal("exit 0")
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not mention %q", stderr, w)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, []string{"JERVIS_NOT_A_SETTING=1"}, "version")
	if code != 0 || !strings.HasPrefix(out, "jervis ") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

// --memprofile writes a heap profile go tool pprof reads when the command
// ends.
func TestMemProfileFlag(t *testing.T) {
	t.Parallel()
	path, data := filepath.Join(t.TempDir(), "heap.prof"), t.TempDir()
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", "--memprofile", path, t.TempDir()); code != 0 && !strings.Contains(errOut, "nothing") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) == 0 || b[0] != 0x1f { // gzip: pprof's format
		t.Fatalf("profile: %d bytes, %v", len(b), err)
	}
}

// --trace writes an execution trace (go tool trace's format) in which each
// write transaction of the embedded stores is a region named by database
// and operation. (Not parallel: a process runs one trace at a time.)
func TestTraceFlag(t *testing.T) {
	path, data, in := filepath.Join(t.TempDir(), "run.trace"), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "note.txt"), []byte("a note to import"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", "--trace", path, in); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b, []byte("jervis.db: put documents")) {
		t.Fatalf("trace: %d bytes, %v; header %q", len(b), err, b[:min(len(b), 16)])
	}
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", "--trace", filepath.Join(t.TempDir(), "no", "such", "dir", "t"), in); code == 0 || !strings.Contains(errOut, "--trace") {
		t.Fatalf("unwritable trace: exit %d %q", code, errOut)
	}
}

// --cpuprofile writes a profile go tool pprof reads, whatever the command.
func TestCPUProfileFlag(t *testing.T) {
	t.Parallel()
	path, data := filepath.Join(t.TempDir(), "cpu.prof"), t.TempDir()
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", "--cpuprofile", path, t.TempDir()); code != 0 && !strings.Contains(errOut, "nothing") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) == 0 || b[0] != 0x1f { // gzip: pprof's format
		t.Fatalf("profile: %d bytes, %v", len(b), err)
	}
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"), t.TempDir()); code == 0 || !strings.Contains(errOut, "--cpuprofile") {
		t.Fatalf("unwritable profile: exit %d %q", code, errOut)
	}
}

// gc_percent (here JERVIS_GC_PERCENT) is the base of the collector's
// percent (internal/gctune): 50 unless set; with GOGC set the percent is
// left to it; a bad one is refused, naming the key. A test's heap is far
// under gctune.MinHeadroom, so the percent the tuner sets is above 100 and
// above the base, whatever the base. Not parallel: the setting is the
// process's.
func TestGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	defer gctune.Stop()
	data := t.TempDir()
	for _, c := range []struct {
		env        []string
		base, want int
	}{{nil, 50, 0}, {[]string{"JERVIS_GC_PERCENT=80"}, 80, 0}, {[]string{"JERVIS_GC_PERCENT=150"}, 150, 0}, {[]string{"GOGC=200", "JERVIS_GC_PERCENT=80"}, 0, 70}} {
		gctune.Stop() // the last command's tuner left alone by this collection
		runtime.GC()  // something live measured before the tuner starts
		debug.SetGCPercent(70)
		if code, _, errOut := runCLI(t, c.env, "import", "--data", data, "--client", "acme", t.TempDir()); code != 0 && !strings.Contains(errOut, "nothing") {
			t.Fatalf("%v: exit %d: %s", c.env, code, errOut)
		}
		got := debug.SetGCPercent(100)
		if c.want == 0 { // the tuner's: set, above 100 and the base
			if got != gctune.Current() || got <= max(100, c.base) || gctune.Base() != c.base {
				t.Errorf("%v: GC percent %d (the tuner's %d) with base %d, want it over %d with base %d", c.env, got, gctune.Current(), gctune.Base(), max(100, c.base), c.base)
			}
		} else if got != c.want || gctune.Base() != c.base {
			t.Errorf("%v: GC percent %d with base %d, want %d with %d", c.env, got, gctune.Base(), c.want, c.base)
		}
	}
	if code, _, errOut := runCLI(t, []string{"JERVIS_GC_PERCENT=5"}, "import", "--data", data, "--client", "acme", t.TempDir()); code == 0 || !strings.Contains(errOut, "gc_percent") {
		t.Fatalf("a bad percent: exit %d %q", code, errOut)
	}
}

// memory_limit (here JERVIS_MEMORY_LIMIT) sets the runtime's soft memory
// limit; a bad one is refused, naming the key. Not parallel: the limit is
// the process's.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	data := t.TempDir()
	if code, _, errOut := runCLI(t, []string{"JERVIS_MEMORY_LIMIT=3GiB"}, "import", "--data", data, "--client", "acme", t.TempDir()); code != 0 && !strings.Contains(errOut, "nothing") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("memory limit %d, want 3 GiB", got)
	}
	if code, _, errOut := runCLI(t, []string{"JERVIS_MEMORY_LIMIT=lots"}, "import", "--data", data, "--client", "acme", t.TempDir()); code == 0 || !strings.Contains(errOut, "memory_limit") {
		t.Fatalf("a bad limit: exit %d %q", code, errOut)
	}
}
