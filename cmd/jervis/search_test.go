package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/kb"
)

func TestSearchCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	a := &app{cfg: config.Default()}
	a.cfg.DataDir = data
	all, err := a.openAll(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = all.Ingest(t.Context(), kb.IngestRequest{Client: "acme", MainNode: "jira:OPS-7", SourceType: "JIRA",
		Content: "Login fails after a password reset; person:ann is looking at the session cache.\n\njira:OPS-7|AFFECTS|service:auth"})
	all.Close()
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, nil, "search", "--data", data, "--client", "acme", "--json", "--group", "passage", "login", "fails")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pack kb.EvidencePack
	if err := json.Unmarshal([]byte(out), &pack); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if pack.Query != "login fails" || len(pack.Items) == 0 || pack.Items[0].Kind != kb.ItemPassage || !strings.Contains(pack.Summary, "passages") {
		t.Fatalf("pack: %+v", pack)
	}
	// By default, items: each source item with its best passages.
	code, out, _ = runCLI(t, nil, "search", "--data", data, "--client", "acme", "--json", "login", "fails")
	pack = kb.EvidencePack{}
	if err := json.Unmarshal([]byte(out), &pack); code != 0 || err != nil || pack.Items[0].Kind != kb.ItemSource || len(pack.Items[0].Passages) == 0 ||
		!strings.Contains(pack.Summary, "items") {
		t.Fatalf("items: %v %+v", err, pack)
	}
	code, out, _ = runCLI(t, nil, "search", "--data", data, "--client", "acme", "--expand", "1", "--group", "passage", "password reset")
	for _, want := range []string{"PASSAGES", "ENTITIES", "RELATIONS", "jira:ops-7 -[affects]-> service:auth", "evidence:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("text output lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "--data", data, "login"}, "--client is required"},
		{[]string{"search", "--data", t.TempDir(), "--client", "acme", "login"}, "no database at"},
		{[]string{"search", "--data", data, "--client", "acme", "--expand", "7", "login"}, "expand"},
		{[]string{"search", "--data", data, "--client", "acme", "--fusion", "max", "login"}, "fusion"},
		{[]string{"search", "--data", data, "--client", "acme", "--group", "doc", "login"}, "group"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}
