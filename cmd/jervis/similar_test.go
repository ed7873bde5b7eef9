package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

func TestSimilarCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	a := &app{cfg: config.Default()}
	a.cfg.DataDir = data
	ctx := context.Background()
	all, err := a.openAll(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var docID string
	for _, it := range []struct{ key, title, body string }{
		{"OPS-7", "Login fails after a password reset", "The session cache keeps the old password until it expires."},
		{"OPS-8", "Cannot log in after resetting the password", "Login is refused until the session cache expires."},
		{"OPS-9", "Dark mode for settings", "Follow the system theme."},
	} {
		d, _, err := all.Store.PutDocument(ctx, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: it.key, Raw: []byte(it.key),
			Normalized: store.Normalized{Title: it.title, Body: it.body}})
		if err == nil {
			_, err = all.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:" + it.key, Title: it.title, Content: it.body,
				SourceURN: d.SourceURN(), SourceType: "JIRA", Kind: kb.KindBody})
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.key == "OPS-7" {
			docID = d.ID
		}
	}
	all.Close()

	for _, ref := range []string{docID, "JIRA:OPS-7", "jira:OPS-7"} {
		code, out, errOut := runCLI(t, nil, "similar", "--data", data, "--client", "acme", "--json", "--limit", "1", ref)
		var res kb.SimilarResult
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.SourceURN != "JIRA:OPS-7" || len(res.Items) != 1 || res.Items[0].SourceURN != "JIRA:OPS-8" {
			t.Fatalf("similar %s: exit %d %v %s %+v", ref, code, err, errOut, res)
		}
	}
	code, out, _ := runCLI(t, nil, "similar", "--data", data, "--client", "acme", "JIRA:OPS-7")
	for _, want := range []string{"items like JIRA:OPS-7 in acme", "query: login fails after password reset", "1. [", "JIRA:OPS-8  Cannot log in"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("text output lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"similar", "--data", data, "JIRA:OPS-7"}, "--client is required"},
		{[]string{"similar", "--data", data, "--client", "acme", "JIRA:OPS-404"}, "not found"},
		{[]string{"similar", "--data", data, "--client", "acme", "nothing"}, "SOURCETYPE:EXTERNALID"},
		{[]string{"similar", "--data", data, "--client", "acme", "--limit", "0", "JIRA:OPS-7"}, "--limit"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}
