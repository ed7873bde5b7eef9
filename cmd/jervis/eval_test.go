package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/kb/eval"
)

// issueJSON is one Jira issue in REST v2 shape.
func issueJSON(key, summary, description string, links ...string) []byte {
	var ls []string
	for _, l := range links { // "outward:Type:KEY" or "inward:Type:KEY"
		dir, rest, _ := strings.Cut(l, ":")
		typ, other, _ := strings.Cut(rest, "|")
		side := "outwardIssue"
		if dir == "inward" {
			side = "inwardIssue"
		}
		ls = append(ls, fmt.Sprintf(`{"type":{"name":%q,"inward":"is %s by","outward":"%s"},%q:{"key":%q}}`, typ, typ, typ, side, other))
	}
	return fmt.Appendf(nil, `{"id":"1","key":%q,"fields":{"summary":%q,"description":%q,"status":{"name":"Open"},"project":{"key":"ACME"},
"assignee":{"name":"ann","displayName":"Ann Novak"},"issuelinks":[%s],"comment":{"comments":[{"author":{"name":"bob"},"body":"Seen on staging too.","created":"2024-01-02T10:00:00.000+0000"}]}}}`,
		key, summary, description, strings.Join(ls, ","))
}

// evalCorpus writes a small corpus of each kind the eval reads: Jira issues
// in a .tar.gz (links of odd type names, one Duplicate pair), a gzipped
// mailbox with a thread whose middle message is missing, and a Git
// repository whose commits cite the issues (one in a merged branch's name).
func evalCorpus(t *testing.T) (jira, mail, repo string) {
	t.Helper()
	dir := t.TempDir()
	issues := map[string][]byte{
		"ACME/ACME-1.json": issueJSON("ACME-1", "Checkout crashes when the cart is empty", "Tapping pay with an empty cart crashes the app.",
			"outward:Gantt: start-finish|ACME-2", "inward:Duplicate|ACME-4"),
		"ACME/ACME-2.json": issueJSON("ACME-2", "Payment provider timeout is too short", "The provider needs 30 seconds.", "inward:Gantt: start-finish|ACME-1"),
		"ACME/ACME-3.json": issueJSON("ACME-3", "Translate the settings screen", "German and French.", "outward:Relates|ACME-2"),
		"ACME/ACME-4.json": issueJSON("ACME-4", "App crashes on pay with empty cart", "Crash when paying with nothing in the cart.", "outward:Duplicate|ACME-1"),
		"ACME/ACME-5.json": issueJSON("ACME-5", "Dark mode for receipts", "Receipts ignore the dark theme. inet addr:10.0.0.1 packets:42"),
	}
	jira = filepath.Join(dir, "acme.tar.gz")
	writeTarGz(t, jira, issues)

	msg := func(id, inReplyTo, refs, body string) string {
		h := "From MAILER-DAEMON Mon Jan  1 00:00:00 2024\nFrom: Ann <ann@acme.test>\nTo: list@acme.test\nSubject: Release plan\nMessage-ID: <" + id + ">\n"
		if inReplyTo != "" {
			h += "In-Reply-To: <" + inReplyTo + ">\nReferences: " + refs + "\n"
		}
		return h + "\n" + body + "\n\n"
	}
	// m3 answers m2, which is not in the corpus; m3's References name m1.
	mbox := msg("m1@acme.test", "", "", "Shall we ship on Friday?") +
		msg("m3@acme.test", "m2@acme.test", "<m1@acme.test>\n\t,<m2@acme.test>", "Agreed with Bob, Friday it is.") +
		msg("m4@acme.test", "m1@acme.test", "<m1@acme.test>", "Friday works for ops.")
	mail = filepath.Join(dir, "list.mbox.gz")
	writeGz(t, mail, []byte(mbox))

	repo = filepath.Join(dir, "repo")
	r, err := gogit.PlainInit(repo, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Worktree()
	for i, m := range []string{"Initial import", "Fix empty-cart crash, fixes ACME-1", "Merge pull request #3 from acme/acme-2-timeout", "Longer provider timeout (ACME-2)"} {
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte(m), 0o644)
		w.Add("f.txt")
		sig := &object.Signature{Name: "Ann Novak", Email: "ann@acme.test", When: time.Date(2024, 1, 1, 10, i, 0, 0, time.UTC)}
		if _, err := w.Commit(m, &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			t.Fatal(err)
		}
	}
	return jira, mail, repo
}

// jervis eval runs the pipeline over real-shaped corpora of every kind and
// reports what the data itself says it should: every item kept, every
// thread, issue link and commit citation an edge, the duplicate found (the
// Duplicate links stripped first), no junk nodes; --check holds it to the
// floors.
func TestEvalMeasuresTheCorporaAgainstTheirOwnLabels(t *testing.T) {
	t.Parallel()
	jira, mail, repo := evalCorpus(t)
	code, out, errOut := runCLI(t, nil, "eval", "--json", "--check", jira, mail, repo)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var r eval.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err, out)
	}
	items := map[string]eval.SourceCount{}
	for _, s := range r.Completeness.Sources {
		items[s.Source] = s
	}
	// 5 issues; 3 messages; 4 commits and the master branch.
	if j, e, g := items["JIRA"], items["EMAIL"], items["GIT"]; j.ItemsIn != 5 || j.Stored != 5 || e.ItemsIn != 3 || e.Stored != 3 || g.ItemsIn != 5 || g.Stored != 5 ||
		j.Lost+e.Lost+g.Lost != 0 || j.Quarantined+e.Quarantined+g.Quarantined != 0 {
		t.Fatalf("completeness %+v", r.Completeness.Sources)
	}
	s := r.Structure
	// m3 → m1 across the missing m2, m4 → m1.
	if s.Threads.Expected != 2 || s.Threads.Found != 2 {
		t.Errorf("threads %+v", s.Threads)
	}
	// ACME-1 start-finish ACME-2 and ACME-3 relates ACME-2 (the Duplicate stripped).
	if s.IssueLinks.Expected != 2 || s.IssueLinks.Found != 2 {
		t.Errorf("issue links %+v", s.IssueLinks)
	}
	// fixes ACME-1, the merged branch acme-2-timeout, (ACME-2).
	if s.CommitIssues.Expected != 3 || s.CommitIssues.Found != 3 {
		t.Errorf("commit → issue %+v", s.CommitIssues)
	}
	d := r.Duplicates
	if d == nil || d.Pairs != 1 || d.Peer.RecallAt10 != 1 || d.Jervis.RecallAt10 != 1 || d.Similar.RecallAt10 != 1 || len(d.PossibleDuplicates) != 6 {
		t.Errorf("duplicates %+v", d)
	}
	if r.ChunkStore != "sqlite (embedded, vector lists from 100000 chunks)" { // the default, far over this corpus
		t.Errorf("chunk store %q", r.ChunkStore)
	}
	if r.Junk.JunkNodes != 0 || r.Junk.Nodes == 0 {
		t.Errorf("junk %+v", r.Junk)
	}
	if r.Cost.Documents != 13 || r.Cost.DocumentsPerSec <= 0 || r.Cost.PeakRSSBytes <= 0 || r.Cost.DiskBytes <= 0 {
		t.Errorf("cost %+v", r.Cost)
	}
	if !strings.Contains(errOut, "every floor met") {
		t.Errorf("stderr: %s", errOut)
	}

	// The table, and a floor crossed: a mailbox of which a third cannot be
	// read fails --check, naming the floor.
	bad := filepath.Join(t.TempDir(), "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "ok.eml"), []byte("From: a@acme.test\nSubject: fine\nMessage-ID: <ok@acme.test>\n\nAll good.\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "broken.eml"), []byte{0x89, 'P', 'N', 'G', 0, 0, 1, 2}, 0o644)
	code, out, errOut = runCLI(t, nil, "eval", "--check", bad)
	if code == 0 || !strings.Contains(errOut, "FLOOR CROSSED: quarantined 1 of 2 documents") ||
		!strings.Contains(out, "quarantined: malformed_input: malformed message: no RFC N header (not an email message)") || !strings.Contains(out, "STRUCTURE RECALL") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
