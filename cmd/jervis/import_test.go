package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
)

func copyInto(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestImportStoresIndexesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	data, in := t.TempDir(), t.TempDir()
	copyInto(t, in,
		"../../pollers/email/testdata/good/alternative.eml", "../../pollers/email/testdata/good/reply.eml",
		"../../pollers/email/testdata/good/html-only.eml", "../../pollers/email/testdata/bad/binary.eml",
		"../../pollers/email/testdata/bad/truncated.eml", "../../pollers/jira/testdata/search_v2.json",
		"../../pollers/jira/testdata/bad_fields.json", "../../pollers/confluence/testdata/page.json",
		"../../pollers/filedrop/testdata/thread.mbox", "../../pollers/filedrop/testdata/freeze.md")
	os.WriteFile(filepath.Join(in, "logo.png"), []byte{0x89, 'P', 'N', 'G'}, 0o644)

	code, out, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// 3 good + 2 bad emails, 2 + 5 Jira issues (4 bad), 1 page, 2 mbox messages, 1 note.
	if !strings.Contains(out, "imported 11 files into acme: 16 documents (16 new versions, 0 unchanged), 6 unparsable, 1 skipped") {
		t.Fatalf("summary:\n%s", out)
	}
	_, statusOut, _ := runCLI(t, nil, "status", "--json", "--data", data)
	var st store.Stats
	json.Unmarshal([]byte(statusOut), &st)
	if st.Documents["INDEXED"] != 10 || st.Documents["QUARANTINED"] != 6 || st.Documents["NEW"] != 0 ||
		st.TasksByKind["DATA_PROCESSING"]["NEW"] != 10 || st.TasksByKind["LINK_PROCESSING"]["NEW"] < 5 {
		t.Fatalf("after import: %s", statusOut)
	}

	_, qOut, _ := runCLI(t, nil, "status", "--quarantined", "--data", data)
	for _, want := range []string{"malformed_input", "not an email message", "unexpected EOF", "OPS-22", "missing fields"} {
		if !strings.Contains(qOut, want) {
			t.Errorf("quarantine list lacks %q:\n%s", want, qOut)
		}
	}
	code, out, _ = runCLI(t, nil, "import", "--data", data, "--client", "acme", in)
	if code != 0 || !strings.Contains(out, "16 documents (0 new versions, 16 unchanged)") || !strings.Contains(out, "0 new DATA_PROCESSING and 0 new LINK_PROCESSING") {
		t.Fatalf("second import:\n%s", out)
	}
	_, again, _ := runCLI(t, nil, "status", "--json", "--data", data)
	if again != statusOut {
		t.Fatalf("second import changed the store:\n%s\n%s", statusOut, again)
	}
	if code, _, errOut := runCLI(t, nil, "import", "--data", data, in); code == 0 || !strings.Contains(errOut, "--client") {
		t.Fatalf("no client: %d %s", code, errOut)
	}
}
