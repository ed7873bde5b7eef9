package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

// identityCorpus writes a Jira issue assigned to the account "annn"
// (display name Ann Novak) and a Git repository where Ann Novak commits
// from two addresses, and Bo Li, whom no issue names, from one.
func identityCorpus(t *testing.T) (issues, repo string) {
	t.Helper()
	issues = filepath.Join(t.TempDir(), "OPS-7.json")
	issue := `{"key":"OPS-7","fields":{"summary":"Login page times out","description":"The login page times out after 30 s; the timeout is set in file:f1.txt.",
		"status":{"name":"In Progress"},"project":{"key":"OPS"},"updated":"2026-03-02T10:00:00.000+0000",
		"assignee":{"name":"annn","key":"annn","displayName":"Ann Novak"},
		"reporter":{"name":"bob","key":"bob","displayName":"Bob Stone"}}}`
	if err := os.WriteFile(issues, []byte(issue), 0o644); err != nil {
		t.Fatal(err)
	}
	repo = t.TempDir()
	r, err := gogit.PlainInit(repo, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Worktree()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, c := range []struct{ name, email, msg string }{
		{"Ann Novak", "ann@work.test", "Add the login form"},
		{"Ann Novak", "ann.novak@home.test", "Fix the login timeout"},
		{"Bo Li", "bo@work.test", "Update the readme"},
	} {
		f := fmt.Sprintf("src/f%d.txt", i)
		os.MkdirAll(filepath.Join(repo, "src"), 0o755)
		if err := os.WriteFile(filepath.Join(repo, f), []byte(c.msg), 0o644); err != nil {
			t.Fatal(err)
		}
		w.Add(f)
		sig := &object.Signature{Name: c.name, Email: c.email, When: t0.Add(time.Duration(i) * time.Hour)}
		if _, err := w.Commit(c.msg, &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			t.Fatal(err)
		}
	}
	return issues, repo
}

func getJSON(t *testing.T, u, key string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityThroughTheAPI: a Jira assignee and a Git author with two
// addresses become one person; expansion from the issue reaches the
// commits the assignee wrote; the aliases say why; a manual split with a
// replay separates them again, a manual merge joins what no rule would,
// and a wipe replay reproduces the same aliases, the decisions included.
func TestIdentityThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	issues, repo := identityCorpus(t)
	im := &importer.Importer{Store: f.st, Kinds: kinds.Default(), Client: "acme", Connection: "import", DataDir: t.TempDir()}
	if err := im.Paths(ctx, []string{issues, repo}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Drain(t, f.st, f.kb, nil)

	commitsFromIssue := func() []string {
		var hood struct {
			Nodes []struct{ Key string } `json:"nodes"`
		}
		getJSON(t, f.url+"/api/v1/nodes/jira:ops-7/neighbors?depth=2&edgeTypes=assigned_to,authored_by", f.acme.key, &hood)
		var out []string
		for _, n := range hood.Nodes {
			if strings.HasPrefix(n.Key, "commit:") {
				out = append(out, n.Key)
			}
		}
		return out
	}
	if got := commitsFromIssue(); len(got) != 2 {
		t.Fatalf("commits within 2 hops of the issue: %v, want Ann's two", got)
	}
	type aliases struct {
		Canonical string `json:"canonical"`
		Aliases   []struct {
			Alias, Canonical, Stage string
			Confidence              float64
			Evidence                []string
		} `json:"aliases"`
		Facts []struct{ Ref, Kind, Value, Evidence string } `json:"facts"`
	}
	var ann aliases
	getJSON(t, f.url+"/api/v1/nodes/person:annn/aliases", f.acme.key, &ann)
	var got []string
	for _, a := range ann.Aliases {
		got = append(got, a.Alias+" "+a.Stage)
		if len(a.Evidence) == 0 {
			t.Fatalf("alias without evidence: %+v", a)
		}
	}
	slices.Sort(got)
	if ann.Canonical != "person:ann@work.test" || !slices.Equal(got, []string{"person:ann.novak@home.test name", "person:annn display name"}) {
		t.Fatalf("Ann's identity: %s %v", ann.Canonical, got)
	}
	if len(ann.Facts) < 3 {
		t.Fatalf("facts of Ann's refs: %+v", ann.Facts)
	}
	var node struct{ Key string }
	getJSON(t, f.url+"/api/v1/nodes/person:annn", f.acme.key, &node)
	if node.Key != "person:ann@work.test" {
		t.Fatalf("the alias's node: %q, want its person", node.Key)
	}
	// Search names the person, not the alias the issue's chunks were
	// written with.
	var pack struct {
		Items []struct {
			SourceURN string   `json:"sourceUrn"`
			NodeKeys  []string `json:"nodeKeys"`
		} `json:"items"`
	}
	getJSON(t, f.url+"/api/v1/search?query=login+page+times+out&limit=3", f.acme.key, &pack)
	if len(pack.Items) == 0 || pack.Items[0].SourceURN != "JIRA:OPS-7" || slices.Contains(pack.Items[0].NodeKeys, "person:annn") ||
		!slices.Contains(pack.Items[0].NodeKeys, "person:ann@work.test") {
		t.Fatalf("search items: %+v", pack.Items)
	}
	// A file the issue names without its path is the one file of that name.
	getJSON(t, f.url+"/api/v1/nodes/file:f1.txt", f.acme.key, &node)
	if node.Key != "file:src/f1.txt" {
		t.Fatalf("file:f1.txt is %q, want file:src/f1.txt", node.Key)
	}
	var bo aliases
	getJSON(t, f.url+"/api/v1/nodes/person:bo@work.test/aliases", f.acme.key, &bo)
	if len(bo.Aliases) != 0 {
		t.Fatalf("Bo merged with someone: %+v", bo)
	}

	// The operator splits the Jira account from Ann: the aliases go at
	// once, the graph after the replay.
	code, body := call(t, "POST", f.url+"/admin/v1/clients/acme/splits", f.admin,
		`{"a":"person:annn","b":"person:ann@work.test","why":"annn is another Ann","reprocess":true}`)
	if code != http.StatusOK || body["job"] == nil {
		t.Fatalf("split: %d %v", code, body)
	}
	waitJob(t, f, body["job"].(string))
	pipelinetest.Drain(t, f.st, f.kb, nil)
	if got := commitsFromIssue(); len(got) != 0 {
		t.Fatalf("after the split the issue still reaches %v", got)
	}
	getJSON(t, f.url+"/api/v1/nodes/person:annn/aliases", f.acme.key, &ann)
	if ann.Canonical != "person:annn" || len(ann.Aliases) != 0 {
		t.Fatalf("after the split: %+v", ann)
	}
	// The operator merges what no rule would: the reporter's account and
	// Bo's address. At once: the alias, and the issue's reporter edge.
	code, body = call(t, "POST", f.url+"/admin/v1/clients/acme/merges", f.admin, `{"a":"person:bob","b":"person:bo@work.test","why":"Bo's Jira account"}`)
	if code != http.StatusOK {
		t.Fatalf("merge: %d %v", code, body)
	}
	var bob aliases
	getJSON(t, f.url+"/api/v1/nodes/person:bob/aliases", f.acme.key, &bob)
	if bob.Canonical != "person:bo@work.test" || len(bob.Aliases) != 1 || bob.Aliases[0].Stage != "manual" ||
		!slices.ContainsFunc(bob.Aliases[0].Evidence, func(e string) bool { return strings.Contains(e, "Bo's Jira account") }) {
		t.Fatalf("after the merge: %+v", bob)
	}
	var edge struct{ Key string }
	getJSON(t, f.url+"/api/v1/edges/"+url.PathEscape("reported_by::jira:ops-7->person:bo@work.test"), f.acme.key, &edge)
	before, err := f.st.ListAliases(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	// A wipe replay reproduces exactly the same aliases.
	code, body = call(t, "POST", f.url+"/admin/v1/reprocess", f.admin, `{"client":"acme","wipe":true}`)
	if code != http.StatusAccepted {
		t.Fatalf("reprocess: %d %v", code, body)
	}
	waitJob(t, f, body["id"].(string))
	pipelinetest.Drain(t, f.st, f.kb, nil)
	after, err := f.st.ListAliases(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 3 {
		t.Fatalf("aliases after a wipe replay:\n%v\nbefore:\n%v", after, before)
	}
}

func waitJob(t *testing.T, f fixture, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, job := call(t, "GET", f.url+"/admin/v1/jobs/"+id, f.admin, "")
		if job["state"] != "running" {
			if job["state"] != "done" {
				t.Fatalf("job %s: %v", id, job)
			}
			return
		}
	}
	t.Fatalf("job %s did not finish", id)
}
