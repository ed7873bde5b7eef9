package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Identity fact kinds: what a source says a person ref stands for.
const (
	// FactEmail: the person's e-mail address (normalised: lower-case).
	FactEmail = "email"
	// FactAccount: the person's account in a source ("jira:eharris").
	FactAccount = "account"
	// FactName: the person's name as the person wrote it (a Git author, a
	// mail's From) or as the source's own user record holds it (a Jira
	// display name); normalised: lower-case, spaces collapsed.
	FactName = "name"
	// FactNamed: a name someone else used for the address (a mail's To and
	// Cc): recorded, never a reason to merge.
	FactNamed = "named"
	// FactCommit: a commit ref's full hash (its own document says it).
	FactCommit = "commit"
	// FactAbbreviation: a commit ref that is an abbreviated hash ("This
	// reverts commit 1a2b3c4"): the commit whose full hash it begins.
	FactAbbreviation = "abbreviation"
	// FactPath: a file ref's path in a repository (a commit touched it).
	FactPath = "path"
	// FactFileName: a file ref that is a bare name ("B.kt" mentioned in a
	// text): the one file of that name, when there is one.
	FactFileName = "file name"
)

// IdentityFact is one thing a source item says about who a person ref is
// (person:eharris is the Jira account eharris, named "ewan harris"), or
// which thing another ref is (commit:1a2b3c4 abbreviates a commit's hash).
type IdentityFact struct {
	Ref      string    `json:"ref"`      // the person ref the item's relations use
	Kind     string    `json:"kind"`     // FactEmail, FactAccount, FactName, FactNamed, FactCommit, FactAbbreviation, FactPath, FactFileName
	Value    string    `json:"value"`    // normalised
	Source   string    `json:"source"`   // the item that says it (its main node ref)
	Evidence string    `json:"evidence"` // the line of the item that says it
	Seen     time.Time `json:"seen"`     // when the item was observed
}

// IdentityDecision is a person's decision on two refs: one person (merge)
// or two (split). It wins over the resolver's rules and survives
// reprocessing.
type IdentityDecision struct {
	Client string    `json:"client"`
	A      string    `json:"a"`
	B      string    `json:"b"`
	Merge  bool      `json:"merge"` // false: a split
	Who    string    `json:"who"`
	Why    string    `json:"why"`
	At     time.Time `json:"at"`
}

// Alias is a ref the resolver found to stand for another, with why.
type Alias struct {
	Alias      string   `json:"alias"`
	Canonical  string   `json:"canonical"`
	Stage      string   `json:"stage"` // the rule that joined them ("email", "account", "git name", "display name", "manual")
	Confidence float64  `json:"confidence"`
	Evidence   []string `json:"evidence"` // the lines that say so
}

// IdentityFactSet is what one source says about identities
// (Identities.PutIdentityFactSets).
type IdentityFactSet struct {
	Client, Source string
	Facts          []IdentityFact
}

// Identities keeps what sources say about who people are, people's
// decisions about it, and the aliases the resolver derives from both.
type Identities interface {
	// PutIdentityFacts replaces what source says about identities with
	// facts (none: it says nothing any more). Putting the same facts again
	// changes nothing, not even IdentityVersion.
	PutIdentityFacts(ctx context.Context, client, source string, facts []IdentityFact) error
	// PutIdentityFactSets puts each set as PutIdentityFacts does, in one
	// write where the backend can (SQLite: all or none; a client's version
	// moves once). No two sets may be of one client's source.
	PutIdentityFactSets(ctx context.Context, sets []IdentityFactSet) error
	// ListIdentityFacts returns every fact of client's sources.
	ListIdentityFacts(ctx context.Context, client string) ([]IdentityFact, error)
	// EachIdentityFact calls fn with every fact of client's sources, in
	// ListIdentityFacts's order (CompareFacts), reading them as it goes
	// where the backend can (SQLite), so that a pass over all of them does
	// not hold them all; an error of fn stops it and is returned.
	EachIdentityFact(ctx context.Context, client string, fn func(IdentityFact) error) error
	// IdentityFactsOf returns client's facts about refs (at most limit).
	IdentityFactsOf(ctx context.Context, client string, refs []string, limit int) ([]IdentityFact, error)
	// PutIdentityDecision records a decision on a pair, replacing an
	// earlier one on the same pair (in either order).
	PutIdentityDecision(ctx context.Context, d IdentityDecision) error
	// ListIdentityDecisions returns client's decisions, oldest first.
	ListIdentityDecisions(ctx context.Context, client string) ([]IdentityDecision, error)
	// ReplaceAliases makes aliases client's resolved aliases: those not
	// listed are removed (an alias recorded by RecordAlias, with no stage,
	// is left alone).
	ReplaceAliases(ctx context.Context, client string, aliases []Alias) error
	// ListAliases returns client's aliases, by alias.
	ListAliases(ctx context.Context, client string) ([]Alias, error)
	// IdentityVersion changes whenever client's facts or decisions do.
	IdentityVersion(ctx context.Context, client string) (string, error)
}

// PrepareFacts validates what source says and returns it as backends store
// it: each fact stamped with source, seen to the microsecond, in key order
// (source, ref, kind, value), one per key.
func PrepareFacts(source string, facts []IdentityFact) ([]IdentityFact, error) {
	out := make([]IdentityFact, 0, len(facts))
	for _, f := range facts {
		if f.Ref == "" || f.Kind == "" || f.Value == "" {
			return nil, fmt.Errorf("%w: identity fact of %s: ref, kind and value are required", ErrInvalid, source)
		}
		f.Source, f.Seen = source, f.Seen.UTC().Truncate(time.Microsecond)
		out = append(out, f)
	}
	slices.SortFunc(out, CompareFacts)
	return slices.CompactFunc(out, func(a, b IdentityFact) bool { return CompareFacts(a, b) == 0 }), nil
}

// CompareFacts orders facts by their key: source, ref, kind, value.
func CompareFacts(a, b IdentityFact) int {
	return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Ref, b.Ref), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Value, b.Value))
}

// SameFacts reports whether two prepared lists say the same.
func SameFacts(a, b []IdentityFact) bool {
	return slices.EqualFunc(a, b, func(x, y IdentityFact) bool {
		return CompareFacts(x, y) == 0 && x.Evidence == y.Evidence && x.Seen.Equal(y.Seen)
	})
}
