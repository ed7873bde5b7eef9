package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		"../../pollers/email/testdata/degraded/truncated.eml", "../../pollers/jira/testdata/search_v2.json",
		"../../pollers/jira/testdata/bad_fields.json", "../../pollers/confluence/testdata/page.json",
		"../../pollers/filedrop/testdata/thread.mbox", "../../pollers/filedrop/testdata/freeze.md")
	os.WriteFile(filepath.Join(in, "logo.png"), []byte{0x89, 'P', 'N', 'G'}, 0o644)

	code, out, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// 3 good + 1 bad emails and 1 kept with a warning (truncated), 2 + 5 Jira
	// issues (4 bad), 1 page, 2 mbox messages, 1 note.
	if !strings.Contains(out, "imported 11 files into acme: 16 documents (16 new versions, 0 unchanged), 5 unparsable, 1 skipped") {
		t.Fatalf("summary:\n%s", out)
	}
	_, statusOut, _ := runCLI(t, nil, "status", "--json", "--data", data)
	var st store.Stats
	json.Unmarshal([]byte(statusOut), &st)
	if st.Documents["INDEXED"] != 11 || st.Documents["QUARANTINED"] != 5 || st.Documents["NEW"] != 0 || st.Degraded != 1 ||
		st.TasksByKind["DATA_PROCESSING"]["NEW"] != 11 || st.TasksByKind["LINK_PROCESSING"]["DONE"] < 5 { // recorded with their documents
		t.Fatalf("after import: %s", statusOut)
	}

	_, qOut, _ := runCLI(t, nil, "status", "--quarantined", "--data", data)
	for _, want := range []string{"malformed_input", "not an email message", "unexpected EOF", "OPS-22", "missing fields", "KEPT WITH WARNINGS", "trunc@acme.test"} {
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

// One empty or unreadable file never aborts an import: it is stored and
// quarantined with its reason, and everything after it is imported. Tar
// archives, gzipped files and Git repositories import like directories.
// Import fails only when nothing at all could be stored.
func TestImportKeepsGoingPastBadFiles(t *testing.T) {
	t.Parallel()
	data, in := t.TempDir(), t.TempDir()
	copyInto(t, in, "../../pollers/email/testdata/good/alternative.eml")
	os.WriteFile(filepath.Join(in, "a-empty.eml"), nil, 0o644)
	os.WriteFile(filepath.Join(in, "b-blank.json"), []byte(" \n"), 0o644)
	os.WriteFile(filepath.Join(in, "c-broken.tar.gz"), []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0o644)
	jira, _ := os.ReadFile("../../pollers/jira/testdata/search_v2.json")
	writeTarGz(t, filepath.Join(in, "d-issues.tar.gz"), map[string][]byte{"export/issues.json": jira})
	mbox, _ := os.ReadFile("../../pollers/filedrop/testdata/thread.mbox")
	writeGz(t, filepath.Join(in, "e-list.mbox.gz"), mbox)

	code, out, errOut := runCLI(t, nil, "import", "--data", data, "--client", "acme", in)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	// The email, 2 empty files, 1 unreadable archive, 2 issues, 2 mbox messages.
	if !strings.Contains(out, "imported 6 files into acme: 8 documents (8 new versions, 0 unchanged), 3 unparsable, 0 skipped (unsupported type), 1 unreadable") {
		t.Fatalf("summary:\n%s", out)
	}
	_, qOut, _ := runCLI(t, nil, "status", "--quarantined", "--data", data)
	for _, want := range []string{"a-empty.eml", "empty file (0 bytes)", "b-blank.json", "empty file (2 bytes)", "c-broken.tar.gz", "unreadable: gzip"} {
		if !strings.Contains(qOut, want) {
			t.Errorf("quarantine list lacks %q:\n%s", want, qOut)
		}
	}

	// Nothing storable: a non-zero exit that says so.
	only := t.TempDir()
	os.WriteFile(filepath.Join(only, "logo.png"), []byte{0x89, 'P', 'N', 'G'}, 0o644)
	if code, _, errOut := runCLI(t, nil, "import", "--data", t.TempDir(), "--client", "acme", only); code == 0 || !strings.Contains(errOut, "nothing could be stored") {
		t.Fatalf("nothing storable: exit %d, %s", code, errOut)
	}
}

func writeGz(t *testing.T, path string, content []byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(content)
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeTarGz(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
		tw.Write(content)
	}
	tw.Close()
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The backlog is read again sooner as it shrinks: a drain's end is seen
// within minRead, not a whole poll late.
func TestNextReadShrinksWithTheBacklog(t *testing.T) {
	t.Parallel()
	const poll = 500 * time.Millisecond
	for _, c := range []struct {
		docs, tasks int64
		want        time.Duration
	}{
		{0, 0, minRead},
		{1, 0, minRead},
		{0, 50, minRead},
		{300, 700, 100 * time.Millisecond},
		{5000, 0, poll},
		{100000, 300000, poll},
	} {
		b := store.Backlog{Documents: store.Counts{"NEW": c.docs}, Tasks: store.Counts{"NEW": c.tasks / 2, "QUALIFICATION_IN_PROGRESS": c.tasks - c.tasks/2}}
		if got := nextRead(b, poll); got != c.want {
			t.Errorf("%d documents, %d tasks waiting: next read in %v, want %v", c.docs, c.tasks, got, c.want)
		}
	}
	if got := nextRead(store.Backlog{Tasks: store.Counts{"NEW": 5000}}, 100*time.Millisecond); got != 100*time.Millisecond {
		t.Errorf("a poll of 100 ms waited %v", got)
	}
}
