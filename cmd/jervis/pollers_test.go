package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

func TestServePollsAFiledropConnection(t *testing.T) {
	t.Parallel()
	data, drop := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(drop, "plan.md"), []byte("# Plan\n\nSee https://wiki.acme.test/plan"), 0o644)
	conf := filepath.Join(t.TempDir(), "jervis.yaml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`connections:
  - id: drop
    client: acme
    type: filedrop
    schedule: "@every 1h"
    filedrop:
      path: %s
  - id: mail
    client: acme
    type: imap
    schedule: "@every 1h"
    imap:
      addr: 127.0.0.1:1
      tls: none
      username: jervis
      password_env: TEST_IMAP_PASSWORD
`, drop)), 0o644)
	cmd := jervis(t, "serve", "--config", conf, "--data", data, "--listen", "127.0.0.1:0", "--roles", "pollers,indexers", "--log-format", "json")
	cmd.Env = append(cmd.Env, "TEST_IMAP_PASSWORD=hunter2-very-secret")
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Until the file is indexed and the IMAP poll has failed: the two
	// connections poll at once, and either may finish first.
	var st store.Stats
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, out, _ := runCLI(t, nil, "status", "--json", "--data", data)
		if json.Unmarshal([]byte(out), &st) == nil && st.Documents["INDEXED"] == 1 && strings.Contains(logs.String(), `"msg":"poll failed"`) {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if st.Documents["INDEXED"] != 1 || st.TasksByKind["LINK_PROCESSING"]["DONE"] != 1 { // recorded with its document
		t.Fatalf("dropped file not indexed: %+v\n%s", st.Documents, logs.String())
	}
	// The unreachable IMAP connection failed without stalling the drop, and
	// its password never reached the logs.
	if !strings.Contains(logs.String(), `"msg":"poll failed"`) || strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("logs:\n%s", logs.String())
	}

	// Without the secret, start-up fails naming the variable.
	code, _, errOut := runCLI(t, nil, "serve", "--config", conf, "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errOut, "TEST_IMAP_PASSWORD is not set") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
