package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// testIdentities: facts are replaced per source and kept per client, the
// version moves only when something changed, decisions are one per pair in
// either order, and resolved aliases replace each other while an alias
// recorded by hand stays.
func testIdentities(t *testing.T, s store.Store) {
	c := ctx(t)
	seen := time.Date(2026, 3, 1, 8, 0, 0, 123456789, time.UTC)
	v0 := must(s.IdentityVersion(c, "acme"))(t)
	facts := []store.IdentityFact{
		{Ref: "person:eharris", Kind: store.FactAccount, Value: "jira:eharris", Evidence: "Assignee: eharris (Ewan Harris)", Seen: seen},
		{Ref: "person:eharris", Kind: store.FactName, Value: "ewan harris", Evidence: "Assignee: eharris (Ewan Harris)", Seen: seen},
	}
	if err := s.PutIdentityFacts(c, "acme", "jira:ops-1", facts); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdentityFacts(c, "globex", "jira:ops-1", facts[:1]); err != nil {
		t.Fatal(err)
	}
	v1 := must(s.IdentityVersion(c, "acme"))(t)
	if v1 == v0 {
		t.Fatal("the version did not move with new facts")
	}
	if err := s.PutIdentityFacts(c, "acme", "jira:ops-1", []store.IdentityFact{facts[1], facts[0]}); err != nil {
		t.Fatal(err)
	}
	if v := must(s.IdentityVersion(c, "acme"))(t); v != v1 {
		t.Fatalf("the same facts again moved the version %s → %s", v1, v)
	}
	got := must(s.ListIdentityFacts(c, "acme"))(t)
	if len(got) != 2 || got[0].Kind != store.FactAccount || got[0].Source != "jira:ops-1" || !got[0].Seen.Equal(seen.Truncate(time.Microsecond)) || got[1].Value != "ewan harris" {
		t.Fatalf("acme facts: %+v", got)
	}
	if got := must(s.ListIdentityFacts(c, "globex"))(t); len(got) != 1 {
		t.Fatalf("globex facts: %+v", got)
	}
	// EachIdentityFact gives what ListIdentityFacts lists, in its order,
	// and stops at fn's error.
	var each []store.IdentityFact
	if err := s.EachIdentityFact(c, "acme", func(f store.IdentityFact) error { each = append(each, f); return nil }); err != nil || !store.SameFacts(each, got) {
		t.Fatalf("each acme fact: %+v, %v; listed %+v", each, err, got)
	}
	stop, calls := errors.New("enough"), 0
	if err := s.EachIdentityFact(c, "acme", func(store.IdentityFact) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, calls)
	}
	// The order is CompareFacts's, strings compared as their bytes: upper
	// case before lower, a prefix first, accented letters after ASCII —
	// also where a store sorts them itself.
	var mixed []store.IdentityFact
	for _, src := range []string{"mail:b", "jira:a", "mail:B"} {
		var fs []store.IdentityFact
		for _, v := range []string{"zed", "Zed", "émile", "Emile", "ab", "a", "a b", "Ábel"} {
			fs = append(fs, store.IdentityFact{Ref: "person:" + v, Kind: store.FactName, Value: v, Evidence: v, Seen: seen},
				store.IdentityFact{Ref: "person:x", Kind: store.FactEmail, Value: v + "@x.org", Evidence: v, Seen: seen})
		}
		if err := s.PutIdentityFacts(c, "initech", src, fs); err != nil {
			t.Fatal(err)
		}
		mixed = append(mixed, must(store.PrepareFacts(src, fs))(t)...)
	}
	slices.SortFunc(mixed, store.CompareFacts)
	each = each[:0]
	if err := s.EachIdentityFact(c, "initech", func(f store.IdentityFact) error { each = append(each, f); return nil }); err != nil || !store.SameFacts(each, mixed) {
		t.Fatalf("each initech fact in order: %v\n got %+v\nwant %+v", err, each, mixed)
	}
	if got := must(s.IdentityFactsOf(c, "acme", []string{"person:eharris", "person:nobody"}, 10))(t); len(got) != 2 {
		t.Fatalf("facts of a ref: %+v", got)
	}
	if got := must(s.IdentityFactsOf(c, "acme", []string{"person:eharris"}, 1))(t); len(got) != 1 {
		t.Fatalf("facts of a ref, at most 1: %+v", got)
	}
	if got := must(s.IdentityFactsOf(c, "acme", []string{"person:nobody"}, 10))(t); len(got) != 0 {
		t.Fatalf("facts of an unknown ref: %+v", got)
	}
	if err := s.PutIdentityFacts(c, "acme", "jira:ops-1", facts[1:]); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ListIdentityFacts(c, "acme"))(t); len(got) != 1 || got[0].Kind != store.FactName {
		t.Fatalf("replaced facts: %+v", got)
	}
	if must(s.IdentityVersion(c, "acme"))(t) == v1 {
		t.Fatal("the version did not move when a fact went")
	}
	// A source is found by the refs it names now, not by those it named.
	named := func(refs ...string) (fs []store.IdentityFact) {
		for _, r := range refs {
			fs = append(fs, store.IdentityFact{Ref: "person:" + r, Kind: store.FactName, Value: r, Evidence: "From: " + r, Seen: seen})
		}
		return fs
	}
	if err := s.PutIdentityFacts(c, "umbrella", "mail:1", named("ada", "bob", "cy")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdentityFacts(c, "umbrella", "mail:1", named("bob", "dee", "dee")); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]int{"ada": 0, "bob": 1, "cy": 0, "dee": 1} {
		if got := must(s.IdentityFactsOf(c, "umbrella", []string{"person:" + ref}, 10))(t); len(got) != want {
			t.Fatalf("facts of person:%s after its source changed: %+v", ref, got)
		}
	}
	if err := s.PutIdentityFacts(c, "acme", "jira:ops-2", []store.IdentityFact{{Ref: "person:x"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a fact without kind and value: %v", err)
	}

	// Decisions: one per pair, in either order; the latest wins.
	v2 := must(s.IdentityVersion(c, "acme"))(t)
	if err := s.PutIdentityDecision(c, store.IdentityDecision{Client: "acme", A: "person:b", B: "person:a", Merge: true, Who: "ops", Why: "same person"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdentityDecision(c, store.IdentityDecision{Client: "acme", A: "person:a", B: "person:b", Who: "ops", Why: "two people after all"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdentityDecision(c, store.IdentityDecision{Client: "acme", A: "person:a", B: "person:a"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a decision on one ref: %v", err)
	}
	ds := must(s.ListIdentityDecisions(c, "acme"))(t)
	if len(ds) != 1 || ds[0].Merge || ds[0].Why != "two people after all" || ds[0].At.IsZero() {
		t.Fatalf("decisions: %+v", ds)
	}
	if ds := must(s.ListIdentityDecisions(c, "globex"))(t); len(ds) != 0 {
		t.Fatalf("globex sees acme's decisions: %+v", ds)
	}
	if must(s.IdentityVersion(c, "acme"))(t) == v2 {
		t.Fatal("the version did not move with a decision")
	}

	// Aliases: resolved ones replace each other; a hand-recorded one stays.
	if err := s.RecordAlias(c, "acme", "person:annie", "person:ann"); err != nil {
		t.Fatal(err)
	}
	first := []store.Alias{
		{Alias: "person:eharris", Canonical: "person:ewan@x.test", Stage: "display name", Confidence: 0.7, Evidence: []string{"Author: Ewan Harris <ewan@x.test>"}},
		{Alias: "person:ewan@y.test", Canonical: "person:ewan@x.test", Stage: "git name", Confidence: 0.9},
	}
	if err := s.ReplaceAliases(c, "acme", first); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ResolveAlias(c, "acme", "person:eharris"))(t); got != "person:ewan@x.test" {
		t.Fatalf("resolved alias resolves to %q", got)
	}
	if err := s.ReplaceAliases(c, "acme", first[1:]); err != nil {
		t.Fatal(err)
	}
	as := must(s.ListAliases(c, "acme"))(t)
	var names []string
	for _, a := range as {
		names = append(names, a.Alias+"→"+a.Canonical+"/"+a.Stage)
	}
	if !slices.Equal(names, []string{"person:annie→person:ann/", "person:ewan@y.test→person:ewan@x.test/git name"}) || as[1].Confidence != 0.9 || as[1].Evidence == nil {
		t.Fatalf("aliases after a replace: %v (%+v)", names, as)
	}
	if _, err := s.ResolveAlias(c, "acme", "person:eharris"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a dropped alias still resolves: %v", err)
	}
	if as := must(s.ListAliases(c, "globex"))(t); len(as) != 0 {
		t.Fatalf("globex sees acme's aliases: %+v", as)
	}
	if err := s.ReplaceAliases(c, "acme", []store.Alias{{Alias: "person:x", Canonical: "person:y"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an alias without a stage: %v", err)
	}
}

// testIdentityFactSets: sets put in one call are as each put alone: facts
// by source and client, the version moving when something changed and not
// when nothing did, an invalid fact refused.
func testIdentityFactSets(t *testing.T, s store.Store) {
	c := ctx(t)
	seen := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	ann := store.IdentityFact{Ref: "person:ann", Kind: store.FactEmail, Value: "ann@acme.test", Evidence: "From: Ann <ann@acme.test>", Seen: seen}
	bob := store.IdentityFact{Ref: "person:bob", Kind: store.FactName, Value: "bob stone", Evidence: "Assignee: bob (Bob Stone)", Seen: seen}
	sets := []store.IdentityFactSet{
		{Client: "acme", Source: "email:1", Facts: []store.IdentityFact{ann}},
		{Client: "acme", Source: "jira:ops-1", Facts: []store.IdentityFact{bob, ann}},
		{Client: "globex", Source: "email:1", Facts: []store.IdentityFact{bob}},
	}
	v0 := must(s.IdentityVersion(c, "acme"))(t)
	if err := s.PutIdentityFactSets(c, sets); err != nil {
		t.Fatal(err)
	}
	v1 := must(s.IdentityVersion(c, "acme"))(t)
	if v1 == v0 {
		t.Fatal("the version did not move with new facts")
	}
	if got := must(s.ListIdentityFacts(c, "acme"))(t); len(got) != 3 {
		t.Fatalf("acme facts: %+v", got)
	}
	if got := must(s.ListIdentityFacts(c, "globex"))(t); len(got) != 1 || got[0].Ref != "person:bob" {
		t.Fatalf("globex facts: %+v", got)
	}
	if err := s.PutIdentityFactSets(c, sets); err != nil {
		t.Fatal(err)
	}
	if v := must(s.IdentityVersion(c, "acme"))(t); v != v1 {
		t.Fatalf("the same sets again moved the version %s → %s", v1, v)
	}
	// jira:ops-1 now says nothing; email:1 unchanged.
	if err := s.PutIdentityFactSets(c, []store.IdentityFactSet{sets[0], {Client: "acme", Source: "jira:ops-1"}}); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ListIdentityFacts(c, "acme"))(t); len(got) != 1 || got[0].Source != "email:1" {
		t.Fatalf("after emptying a source: %+v", got)
	}
	// A source named twice in one call ends with what its last set says.
	if err := s.PutIdentityFactSets(c, []store.IdentityFactSet{sets[0], {Client: "acme", Source: "email:1", Facts: []store.IdentityFact{bob}}}); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ListIdentityFacts(c, "acme"))(t); len(got) != 1 || got[0].Source != "email:1" || got[0].Ref != "person:bob" {
		t.Fatalf("a source named twice: %+v", got)
	}
	if err := s.PutIdentityFactSets(c, []store.IdentityFactSet{{Client: "acme", Source: "jira:ops-2", Facts: []store.IdentityFact{{Ref: "person:x"}}}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a fact without kind and value: %v", err)
	}
}
