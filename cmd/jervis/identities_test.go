package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

func TestIdentitiesCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	a := &app{cfg: config.Default()}
	a.cfg.DataDir = data
	ctx := context.Background()
	st, err := a.openStore(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	fact := func(ref, kind, value string) store.IdentityFact {
		return store.IdentityFact{Ref: ref, Kind: kind, Value: value, Evidence: ref + " " + value, Seen: seen}
	}
	for source, facts := range map[string][]store.IdentityFact{
		"commit:1": {fact("person:ann@work.test", store.FactEmail, "ann@work.test"), fact("person:ann@work.test", store.FactName, "ann novak")},
		"commit:2": {fact("person:ann@home.test", store.FactEmail, "ann@home.test"), fact("person:ann@home.test", store.FactName, "ann novak")},
		"commit:3": {fact("person:chris@a.test", store.FactEmail, "chris@a.test"), fact("person:chris@a.test", store.FactName, "chris lee")},
		"jira:1":   {fact("person:clee", store.FactAccount, "jira:clee"), fact("person:clee", store.FactName, "chris lee")},
		"jira:2":   {fact("person:clee2", store.FactAccount, "jira:clee2"), fact("person:clee2", store.FactName, "chris lee")},
	} {
		if err := st.PutIdentityFacts(ctx, "acme", source, facts); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	code, out, errOut := runCLI(t, nil, "identities", "--data", data, "--client", "acme")
	for _, want := range []string{"5 person refs → 4 people; 1 aliases", "person:ann@work.test  person:ann@home.test  name   0.90"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("identities lacks %q (exit %d %s):\n%s", want, code, errOut, out)
		}
	}
	code, out, _ = runCLI(t, nil, "identities", "--data", data, "--client", "acme", "--review")
	if code != 0 || !strings.Contains(out, "chris lee  person:clee person:clee2  person:chris@a.test  2 accounts are named so") {
		t.Fatalf("review:\n%s", out)
	}
	code, out, _ = runCLI(t, nil, "identities", "--data", data, "--client", "acme", "--json")
	var res kb.Identities
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Aliases) != 1 || len(res.Ambiguous) != 1 {
		t.Fatalf("--json: %v %+v", err, res)
	}
	if code, _, errOut := runCLI(t, nil, "identities", "--data", data); code == 0 || !strings.Contains(errOut, "--client is required") {
		t.Fatalf("no client: exit %d %s", code, errOut)
	}
}
