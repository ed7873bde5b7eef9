package kb_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

func fact(ref, kind, value, source string, day int) store.IdentityFact {
	return store.IdentityFact{Ref: ref, Kind: kind, Value: value, Source: source, Evidence: source + ": " + kind + " " + value,
		Seen: time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC)}
}

// author is what a commit says of its author: an address and a name.
func author(email, name string, day int) []store.IdentityFact {
	ref := "person:" + email
	return []store.IdentityFact{fact(ref, store.FactEmail, email, "commit:"+email, day), fact(ref, store.FactName, kb.NormalizeName(name), "commit:"+email, day)}
}

// account is what a Jira issue says of a user: the account, its display
// name.
func account(id, name string, day int) []store.IdentityFact {
	ref := "person:" + id
	return []store.IdentityFact{fact(ref, store.FactAccount, "jira:"+id, "jira:ops-"+id, day), fact(ref, store.FactName, kb.NormalizeName(name), "jira:ops-"+id, day)}
}

func aliasMap(ids kb.Identities) map[string]string {
	m := map[string]string{}
	for _, a := range ids.Aliases {
		m[a.Alias] = a.Canonical + " (" + a.Stage + ")"
	}
	return m
}

func TestResolveIdentities(t *testing.T) {
	var facts []store.IdentityFact
	add := func(fs ...[]store.IdentityFact) {
		for _, f := range fs {
			facts = append(facts, f...)
		}
	}
	add(
		// One author, two addresses: the one seen first is canonical.
		author("ewan.h@home.test", "Ewan Harris", 3), author("ewan@work.test", "Ewan  Harris", 1),
		// ... and the Jira account whose display name is his.
		account("eharris", "Ewan Harris", 5),
		// Two different names on one address: one person already.
		author("chris.w@home.test", "Chris Williams", 2), author("chris.w@home.test", "Christopher Williams", 4),
		// Two people with one first name: nothing in common but "chris".
		author("chris@cb.test", "Chris", 1), author("chris.b@cb.test", "Chris", 2),
		// A display name two people with addresses answer to: ambiguous.
		author("sam@a.test", "Sam Lee", 1), author("sam.lee@b.test", "Sam Lee", 2), account("slee", "Sam Lee", 3),
		// Two accounts with one display name, one person with an address
		// named so: ambiguous, not merged.
		account("jdoe", "Jane Doe", 1), account("jdoe2", "Jane Doe", 2), author("jane@c.test", "Jane Doe", 3),
		// A placeholder and a first name with an initial never merge by
		// name.
		author("j@x.test", "J Smith", 1), author("j.smith@y.test", "J Smith", 2),
		author("a@local.test", "Your Name", 1), author("b@local.test", "Your Name", 2),
		// An address with many names (a list that rewrites From) merges
		// nothing by name.
		author("list@lists.test", "Ann Smith via list", 1), author("list@lists.test", "Bob Jones via list", 1),
		author("list@lists.test", "Carl Diaz via list", 1), author("list@lists.test", "Dana Fox via list", 1),
		author("ann@own.test", "Ann Smith via list", 2),
		// An account with an e-mail address: the address is canonical.
		account("kim", "Kim Park", 1), []store.IdentityFact{fact("person:kim", store.FactEmail, "kim@d.test", "jira:ops-kim", 1)},
		author("kim@d.test", "Kim Park", 2),
		// A name only someone else wrote does not merge.
		[]store.IdentityFact{fact("person:pat@e.test", store.FactNamed, "pat quinn", "mail:1", 1), fact("person:pat@e.test", store.FactEmail, "pat@e.test", "mail:1", 1)},
		account("pquinn", "Pat Quinn", 2),
		// Commits: an abbreviated hash joins the one commit it begins; one
		// that two commits begin with is left for review.
		[]store.IdentityFact{
			fact("commit:1a2b3c4d5e6f00000000000000000000000000aa", store.FactCommit, "1a2b3c4d5e6f00000000000000000000000000aa", "commit:1a2b", 1),
			fact("commit:1a2b3c4d5e6f00000000000000000000000000bb", store.FactCommit, "1a2b3c4d5e6f00000000000000000000000000bb", "commit:1a2b", 1),
			fact("commit:9f8e7d6c5b4a00000000000000000000000000cc", store.FactCommit, "9f8e7d6c5b4a00000000000000000000000000cc", "commit:9f8e", 1),
			fact("commit:9f8e7d6", store.FactAbbreviation, "9f8e7d6", "commit:revert", 2),
			fact("commit:1a2b3c4", store.FactAbbreviation, "1a2b3c4", "commit:revert", 2),
			fact("commit:0000000", store.FactAbbreviation, "0000000", "commit:revert", 2),
		},
		// Files: a bare name joins the one file of that name; a name two
		// files have is left for review.
		[]store.IdentityFact{
			fact("file:src/a/b.kt", store.FactPath, "src/a/b.kt", "commit:1a2b", 1),
			fact("file:src/a/util.go", store.FactPath, "src/a/util.go", "commit:1a2b", 1),
			fact("file:src/b/util.go", store.FactPath, "src/b/util.go", "commit:1a2b", 1),
			fact("file:b.kt", store.FactFileName, "b.kt", "jira:ops-1", 2),
			fact("file:util.go", store.FactFileName, "util.go", "jira:ops-1", 2),
			fact("file:c.kt", store.FactFileName, "c.kt", "jira:ops-1", 2),
		},
	)
	got := kb.ResolveIdentities(facts, nil)
	want := map[string]string{
		"person:ewan.h@home.test": "person:ewan@work.test (name)",
		"person:eharris":          "person:ewan@work.test (display name)",
		"person:sam.lee@b.test":   "person:sam@a.test (name)",
		"person:slee":             "person:sam@a.test (display name)",
		"person:kim":              "person:kim@d.test (email)",
		"commit:9f8e7d6":          "commit:9f8e7d6c5b4a00000000000000000000000000cc (abbreviation)",
		"file:b.kt":               "file:src/a/b.kt (file name)",
	}
	if m := aliasMap(got); !mapsEqual(m, want) {
		t.Fatalf("aliases:\n got %v\nwant %v", m, want)
	}
	for _, a := range got.Aliases {
		if len(a.Evidence) == 0 || a.Confidence <= 0 || a.Confidence > 1 {
			t.Fatalf("alias without evidence or confidence: %+v", a)
		}
		if a.Alias == "person:eharris" && (a.Confidence != 0.7 || !slices.Contains(a.Evidence, "jira:ops-eharris: name ewan harris")) {
			t.Fatalf("display-name alias: %+v", a)
		}
	}
	if len(got.Ambiguous) != 3 || got.Ambiguous[0].Name != "1a2b3c4" || len(got.Ambiguous[0].Candidates) != 2 ||
		got.Ambiguous[1].Name != "util.go" || len(got.Ambiguous[1].Candidates) != 2 ||
		got.Ambiguous[2].Name != "jane doe" || !slices.Equal(got.Ambiguous[2].Refs, []string{"person:jdoe", "person:jdoe2"}) {
		t.Fatalf("ambiguous: %+v", got.Ambiguous)
	}
	if got.Refs != len(personRefs(facts)) || got.Persons != got.Refs-5 {
		t.Fatalf("persons %d of %d person refs", got.Persons, got.Refs)
	}
	if got.ByStage["name"] != 2 || got.ByStage["display name"] != 2 || got.ByStage["email"] != 1 {
		t.Fatalf("by stage: %v", got.ByStage)
	}

	// Any order of the facts: the same result.
	for i := range 20 {
		shuffled := slices.Clone(facts)
		rand.New(rand.NewPCG(uint64(i), 7)).Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if again := kb.ResolveIdentities(shuffled, nil); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("order %d gives another resolution:\n%v\n%v", i, again, got)
		}
	}

	// People's decisions win: a split keeps two refs apart whatever the
	// rules say; a merge joins what no rule would.
	decided := kb.ResolveIdentities(facts, []store.IdentityDecision{
		{A: "person:ewan.h@home.test", B: "person:ewan@work.test", Merge: false, Who: "ops", Why: "two Ewans"},
		{A: "person:chris@cb.test", B: "person:chris.b@cb.test", Merge: true, Who: "ops", Why: "same Chris"},
	})
	m := aliasMap(decided)
	if _, ok := m["person:ewan.h@home.test"]; ok {
		t.Fatalf("a split pair merged: %v", m)
	}
	if m["person:chris@cb.test"] != "person:chris.b@cb.test (manual)" && m["person:chris.b@cb.test"] != "person:chris@cb.test (manual)" {
		t.Fatalf("a manual merge not made: %v", m)
	}
}

func personRefs(facts []store.IdentityFact) map[string]bool {
	out := map[string]bool{}
	for _, f := range facts {
		if strings.HasPrefix(f.Ref, "person:") {
			out[f.Ref] = true
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
