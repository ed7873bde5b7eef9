package kinds_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers/git"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

func factLines(fs []store.IdentityFact) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s=%s [%s]", f.Ref, f.Kind, f.Value, f.Evidence))
	}
	slices.Sort(out)
	return out
}

// TestIdentityFacts: each kind says who its people are, each fact with
// the line that says it.
func TestIdentityFacts(t *testing.T) {
	t.Parallel()
	reg := kinds.Default()
	parse := func(name, raw string) store.Document {
		t.Helper()
		docs, err := reg.Parse(name, []byte(raw))
		if err != nil || len(docs) != 1 {
			t.Fatalf("%s: %v %d", name, err, len(docs))
		}
		return docs[0]
	}
	for _, tc := range []struct {
		name string
		doc  store.Document
		want []string
	}{
		{"jira: accounts with display names, an address when the site shows it, each user once",
			parse("OPS-1.json", `{"key":"OPS-1","fields":{"summary":"S","status":{"name":"Open"},
				"assignee":{"name":"ann","key":"ann","displayName":"Ann Novak"},
				"reporter":{"accountId":"5b10a2844c20165700ede21g","displayName":"Bob Stone","emailAddress":"Bob@Acme.test"},
				"comment":{"comments":[{"author":{"name":"ann","displayName":"Ann Novak"},"body":"ok","created":"2026-03-01T10:00:00.000+0000"}]}}}`),
			[]string{
				"person:ann account=jira:ann [Jira user ann: Ann Novak]",
				"person:ann name=ann novak [Jira user ann: Ann Novak]",
				"person:bob@acme.test account=jira:5b10a2844c20165700ede21g [Jira user 5b10a2844c20165700ede21g: Bob Stone <Bob@Acme.test>]",
				"person:bob@acme.test email=bob@acme.test [Jira user 5b10a2844c20165700ede21g: Bob Stone <Bob@Acme.test>]",
				"person:bob@acme.test name=bob stone [Jira user 5b10a2844c20165700ede21g: Bob Stone <Bob@Acme.test>]",
			}},
		{"email: the sender's own name (a directory's \"Last, First\" one name), the names others are given",
			parse("m.eml", "From: \"Novak, Ann\" <Ann@Acme.test>\r\nTo: Bob Stone <bob@acme.test>, carl@acme.test\r\nCc: Team <team@acme.test>\r\n"+
				"Subject: Hi\r\nMessage-ID: <1@acme.test>\r\nDate: Mon, 2 Mar 2026 10:00:00 +0000\r\n\r\nHello.\r\n"),
			[]string{
				"person:ann@acme.test email=ann@acme.test [From: Novak, Ann <Ann@Acme.test>]",
				"person:ann@acme.test name=ann novak [From: Novak, Ann <Ann@Acme.test>]",
				"person:bob@acme.test email=bob@acme.test [To: Bob Stone <bob@acme.test>]",
				"person:bob@acme.test named=bob stone [To: Bob Stone <bob@acme.test>]",
				"person:carl@acme.test email=carl@acme.test [To: carl@acme.test]",
				"person:team@acme.test email=team@acme.test [Cc: Team <team@acme.test>]",
				"person:team@acme.test named=team [Cc: Team <team@acme.test>]",
			}},
		{"confluence: an author known by display name only",
			parse("p.json", `{"id":"42","type":"page","title":"Runbook","space":{"key":"OPS"},"version":{"number":1,"by":{"displayName":"Ann Novak"}},
				"body":{"storage":{"value":"<p>Steps.</p>"}}}`),
			[]string{"person:ann novak name=ann novak [Author: Ann Novak]"}},
	} {
		got := factLines(reg.Shape(tc.doc).Identities)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}

	// Git: the author and, when another, the committer, and the people
	// the trailers name.
	dir := t.TempDir()
	r, err := gogit.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Worktree()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644)
	w.Add("a.txt")
	when := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	if _, err := w.Commit("Fix the login\n\nCo-authored-by: Bo Li <bo@acme.test>\nSigned-off-by: Ann Novak <ann@home.test>\nReviewed-by: Cy Ma <cy@acme.test>\n",
		&gogit.CommitOptions{Author: &object.Signature{Name: "Ann Novak", Email: "Ann@Acme.test", When: when},
			Committer: &object.Signature{Name: "GitHub", Email: "noreply@github.com", When: when}}); err != nil {
		t.Fatal(err)
	}
	head, _ := r.Head()
	fix := head.Hash().String()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("b"), 0o644)
	w.Add("a.txt")
	sig := &object.Signature{Name: "Bo Li", Email: "bo@acme.test", When: when.Add(time.Hour)}
	if _, err := w.Commit("Revert \"Fix the login\"\n\nThis reverts commit "+fix[:9]+".\n", &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	src, err := git.New(git.Config{URL: dir, Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Poll(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var commit, revert, branch store.Document
	for _, d := range b.Documents {
		switch d.ExternalID {
		case fix:
			commit = d
		case head.Hash().String():
		case "branch:master":
			branch = d
		default:
			revert = d
		}
	}
	if got, want := reg.Shape(branch).Summary, "Branch master is at commit "+revert.ExternalID+"."; got != want {
		t.Errorf("branch summary %q, want %q", got, want)
	}
	got := factLines(reg.Shape(commit).Identities)
	want := []string{
		"person:ann@acme.test email=ann@acme.test [Author: Ann Novak <ann@acme.test>]",
		"person:ann@acme.test name=ann novak [Author: Ann Novak <ann@acme.test>]",
		"person:ann@home.test email=ann@home.test [Signed-off-by: Ann Novak <ann@home.test>]",
		"person:ann@home.test name=ann novak [Signed-off-by: Ann Novak <ann@home.test>]",
		"person:bo@acme.test email=bo@acme.test [Co-authored-by: Bo Li <bo@acme.test>]",
		"person:bo@acme.test name=bo li [Co-authored-by: Bo Li <bo@acme.test>]",
		"person:cy@acme.test email=cy@acme.test [Reviewed-by: Cy Ma <cy@acme.test>]",
		"person:cy@acme.test named=cy ma [Reviewed-by: Cy Ma <cy@acme.test>]",
		"person:noreply@github.com email=noreply@github.com [Committer: GitHub <noreply@github.com>]",
		"person:noreply@github.com name=github [Committer: GitHub <noreply@github.com>]",
		"commit:" + fix + " commit=" + fix + " [Commit: " + fix + "]",
		"file:a.txt path=a.txt [File: a.txt]",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("git:\n got %q\nwant %q", got, want)
	}

	// A revert names the commit it reverts, by an abbreviated hash: an
	// edge to it, and the fact that resolves it to the full one.
	shape := reg.Shape(revert)
	got = factLines(shape.Identities)
	short := fix[:9]
	if !slices.Contains(got, "commit:"+short+" abbreviation="+short+" [This reverts commit "+short+".]") {
		t.Errorf("revert facts: %q", got)
	}
	if !slices.ContainsFunc(shape.Relations, func(r kb.MetaRelation) bool { return r.Type == "reverts" && r.To == "commit:"+short }) {
		t.Errorf("revert relations: %+v", shape.Relations)
	}
	res := kb.ResolveIdentities(append(reg.Shape(commit).Identities, shape.Identities...), nil)
	if !slices.ContainsFunc(res.Aliases, func(a store.Alias) bool { return a.Alias == "commit:"+short && a.Canonical == "commit:"+fix }) {
		t.Errorf("the abbreviated hash is not resolved: %+v", res.Aliases)
	}
}
