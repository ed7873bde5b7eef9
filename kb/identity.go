package kb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jervis-dev/jervis/internal/store"
)

// Identity resolution stages, most certain first, with the confidence an
// alias made by each carries.
const (
	StageManual      = "manual"       // a person merged the two (PutIdentityDecision)
	StageEmail       = "email"        // the same e-mail address
	StageAccount     = "account"      // the same account of a source
	StageName        = "name"         // one full name written with two addresses (Git authors, mail senders)
	StageDisplayName = "display name" // an account's display name, the name of exactly one person with an address
	// StageAbbreviation joins an abbreviated commit hash to the one commit
	// whose full hash begins with it.
	StageAbbreviation = "abbreviation"
	// StageFileName joins a bare file name to the one file of that name.
	StageFileName = "file name"
)

var stageConfidence = map[string]float64{StageManual: 1, StageEmail: 1, StageAccount: 1, StageAbbreviation: 1, StageFileName: 0.9, StageName: 0.9, StageDisplayName: 0.7}

// Identities is what the resolver derived from a client's identity facts
// and decisions: the aliases to record, and what it left for review.
type Identities struct {
	Aliases []store.Alias `json:"aliases"`
	// Ambiguous are names the rules could not settle: several people with
	// an address answer to them, or several accounts do. Nothing of them
	// was merged.
	Ambiguous []Ambiguity `json:"ambiguous"`
	// Persons counts distinct people: refs after merging.
	Persons int `json:"persons"`
	// Refs counts the person refs the facts name.
	Refs int `json:"refs"`
	// ByStage counts aliases by the stage that made them.
	ByStage map[string]int `json:"byStage"`
}

// Ambiguity is a name the rules did not settle.
type Ambiguity struct {
	Name       string   `json:"name"`
	Refs       []string `json:"refs"`       // the account or name refs that carry it
	Candidates []string `json:"candidates"` // the people with an address who answer to it
	Reason     string   `json:"reason"`
}

// NormalizeName is how names are compared: lower-case letters and digits,
// one space between words ("Ewan  Harris" = "ewan harris"; "O'Neil" =
// "o neil"), a directory's "Last, First" turned around ("Harris, Ewan" =
// "ewan harris").
func NormalizeName(s string) string {
	if last, first, ok := strings.Cut(s, ","); ok && !strings.ContainsAny(first, ",@") && strings.TrimSpace(first) != "" && strings.TrimSpace(last) != "" {
		s = first + " " + last
	}
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
}

// fullName reports whether a normalised name can identify someone: two
// words or more, none a single letter, and not a placeholder.
func fullName(n string) bool {
	words := strings.Fields(n)
	if len(words) < 2 {
		return false
	}
	for _, w := range words {
		if len([]rune(w)) < 2 {
			return false
		}
	}
	switch n {
	case "your name", "unknown user", "no name", "root user", "git user", "github action", "github actions", "the committer":
		return false
	}
	return true
}

// sharedAddress: an address written with more names than this is a list's
// or a team's (a mailing list that rewrites From), not one person's: its
// names are no reason to merge.
const sharedAddress = 3

type identityRef struct {
	ref      string
	emails   map[string]bool
	accounts map[string]bool
	commit   string              // its full hash (FactCommit)
	abbrev   string              // the hash it abbreviates (FactAbbreviation)
	path     string              // its path (FactPath)
	fileName string              // the bare name it is (FactFileName)
	names    map[string][]string // name → evidence
	seen     time.Time
	evidence map[string][]string // kind:value → evidence lines
}

type link struct {
	a, b     string
	stage    string
	evidence []string
}

// ResolveIdentities derives a client's aliases from what its sources say
// (facts) and what people decided, deterministically: the same facts and
// decisions give the same aliases whatever order they came in. Stages, in
// order: manual merges; the same e-mail address; the same source account;
// one full name written with two addresses by their owner (a Git author, a
// mail's sender) — not for an address written with many names; an
// account's (or a name-only ref's) display name matching exactly one
// person with an address and no other account — otherwise listed as
// ambiguous. A manual split wins over every stage: two refs split are
// never in one person. Each person's canonical ref is its e-mail address
// seen first (then the smallest), else its account ref seen first.
func ResolveIdentities(facts []store.IdentityFact, decisions []store.IdentityDecision) Identities {
	refs := identityRefs{}
	for _, f := range facts {
		refs.add(f)
	}
	return refs.resolve(decisions)
}

// identityRefs is what a client's facts say of each ref, gathered a fact
// at a time (add): what resolving needs of them, not the facts — at
// 100,000 documents the facts read whole were about 200 MB at once.
type identityRefs map[string]*identityRef

func (refs identityRefs) get(ref string) *identityRef {
	r := refs[ref]
	if r == nil {
		r = &identityRef{ref: ref, emails: map[string]bool{}, accounts: map[string]bool{}, names: map[string][]string{}, evidence: map[string][]string{}}
		refs[ref] = r
	}
	return r
}

// add takes in one fact (in CompareFacts order, for the same evidence
// whatever the backend).
func (refs identityRefs) add(f store.IdentityFact) {
	r := refs.get(f.Ref)
	if r.seen.IsZero() || f.Seen.Before(r.seen) {
		r.seen = f.Seen
	}
	k := f.Kind + ":" + f.Value
	if len(r.evidence[k]) < 3 && !slices.Contains(r.evidence[k], f.Evidence) {
		r.evidence[k] = append(r.evidence[k], f.Evidence)
	}
	switch f.Kind {
	case store.FactEmail:
		r.emails[f.Value] = true
	case store.FactAccount:
		r.accounts[f.Value] = true
	case store.FactName:
		r.names[f.Value] = r.evidence[k]
	case store.FactCommit:
		r.commit = strings.ToLower(f.Value)
	case store.FactAbbreviation:
		r.abbrev = strings.ToLower(f.Value)
	case store.FactPath:
		r.path = strings.ToLower(f.Value)
	case store.FactFileName:
		r.fileName = strings.ToLower(f.Value)
	}
}

// resolve is ResolveIdentities over the facts added.
func (refs identityRefs) resolve(decisions []store.IdentityDecision) Identities {
	for _, d := range decisions {
		refs.get(d.A)
		refs.get(d.B)
	}
	keys := slices.Sorted(maps.Keys(refs))

	// Union-find over refs, refusing any union a split forbids.
	parent := map[string]string{}
	members := map[string][]string{}
	for _, k := range keys {
		parent[k], members[k] = k, []string{k}
	}
	var find func(string) string
	find = func(x string) string {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	split := map[[2]string]bool{}
	for _, d := range decisions {
		if !d.Merge {
			split[[2]string{d.A, d.B}], split[[2]string{d.B, d.A}] = true, true
		}
	}
	var links []link
	union := func(a, b, stage string, evidence []string) bool {
		ra, rb := find(a), find(b)
		if ra == rb {
			return false
		}
		for _, x := range members[ra] {
			for _, y := range members[rb] {
				if split[[2]string{x, y}] {
					return false
				}
			}
		}
		if rb < ra {
			ra, rb = rb, ra
		}
		parent[rb] = ra
		members[ra] = append(members[ra], members[rb]...)
		delete(members, rb)
		links = append(links, link{a: a, b: b, stage: stage, evidence: evidence})
		return true
	}

	for _, d := range decisions {
		if d.Merge {
			union(d.A, d.B, StageManual, []string{fmt.Sprintf("merged by %s: %s", cmp.Or(d.Who, "an operator"), d.Why)})
		}
	}
	// The same address, the same account: refs that share a value.
	for _, kind := range []struct {
		stage string
		vals  func(*identityRef) map[string]bool
	}{{StageEmail, func(r *identityRef) map[string]bool { return r.emails }}, {StageAccount, func(r *identityRef) map[string]bool { return r.accounts }}} {
		first := map[string]string{}
		for _, k := range keys {
			r := refs[k]
			for _, v := range slices.Sorted(maps.Keys(kind.vals(r))) {
				if f, ok := first[v]; ok {
					fk := map[string]string{StageEmail: store.FactEmail, StageAccount: store.FactAccount}[kind.stage] + ":" + v
					union(f, k, kind.stage, append(slices.Clone(refs[f].evidence[fk]), r.evidence[fk]...))
				} else {
					first[v] = k
				}
			}
		}
	}
	// An abbreviated hash: the one commit whose hash begins with it.
	var hashes []string // sorted full hashes
	byHash := map[string]string{}
	for _, k := range keys {
		if h := refs[k].commit; h != "" {
			if _, dup := byHash[h]; !dup {
				hashes = append(hashes, h)
			}
			byHash[h] = k
		}
	}
	slices.Sort(hashes)
	var out Identities
	for _, k := range keys {
		r := refs[k]
		if len(r.abbrev) < 7 || r.commit != "" {
			continue
		}
		i, _ := slices.BinarySearch(hashes, r.abbrev)
		var cands []string
		for ; i < len(hashes) && strings.HasPrefix(hashes[i], r.abbrev) && len(cands) < 5; i++ {
			cands = append(cands, byHash[hashes[i]])
		}
		switch len(cands) {
		case 0: // a commit not (yet) seen
		case 1:
			union(k, cands[0], StageAbbreviation, append(slices.Clone(r.evidence[store.FactAbbreviation+":"+r.abbrev]),
				refs[cands[0]].evidence[store.FactCommit+":"+refs[cands[0]].commit]...))
		default:
			out.Ambiguous = append(out.Ambiguous, Ambiguity{Name: r.abbrev, Refs: []string{k}, Candidates: cands, Reason: fmt.Sprintf("%d commits begin with it", len(cands))})
		}
	}
	// A bare file name: the one file of that name.
	byBase := map[string][]string{}
	for _, k := range keys {
		if p := refs[k].path; p != "" && strings.Contains(p, "/") {
			base := p[strings.LastIndex(p, "/")+1:]
			byBase[base] = append(byBase[base], k)
		}
	}
	for _, k := range keys {
		r := refs[k]
		if r.fileName == "" || strings.Contains(r.fileName, "/") || r.path != "" {
			continue
		}
		switch cands := byBase[r.fileName]; len(cands) {
		case 0:
		case 1:
			union(k, cands[0], StageFileName, append(slices.Clone(r.evidence[store.FactFileName+":"+r.fileName]),
				refs[cands[0]].evidence[store.FactPath+":"+refs[cands[0]].path]...))
		default:
			out.Ambiguous = append(out.Ambiguous, Ambiguity{Name: r.fileName, Refs: []string{k}, Candidates: slices.Clone(cands[:min(len(cands), 5)]),
				Reason: fmt.Sprintf("%d files are named so", len(cands))})
		}
	}
	// One full name, two addresses, each written by its owner.
	personal := func(r *identityRef) bool { return len(r.emails) > 0 && len(r.names) <= sharedAddress }
	byName := map[string][]string{}
	for _, k := range keys {
		if r := refs[k]; personal(r) {
			for n := range r.names {
				if fullName(n) {
					byName[n] = append(byName[n], k)
				}
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		ks := byName[n]
		for _, k := range ks[1:] {
			union(ks[0], k, StageName, append(slices.Clone(refs[ks[0]].names[n]), refs[k].names[n]...))
		}
	}
	// Display names: an account (or a ref that is only a name) whose name
	// is one person's with an address, and no other account's.
	hasEmail := func(root string) bool {
		for _, m := range members[root] {
			if len(refs[m].emails) > 0 {
				return true
			}
		}
		return false
	}
	people := map[string]map[string]bool{}   // name → roots of people with an address
	nameless := map[string]map[string]bool{} // name → roots without one
	for _, k := range keys {
		r := refs[k]
		if len(r.emails) > 0 && !personal(r) {
			continue
		}
		for n := range r.names {
			if !fullName(n) {
				continue
			}
			root := find(k)
			m := nameless
			if hasEmail(root) {
				m = people
			}
			if m[n] == nil {
				m[n] = map[string]bool{}
			}
			m[n][root] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(nameless)) {
		roots, cands := slices.Sorted(maps.Keys(nameless[n])), slices.Sorted(maps.Keys(people[n]))
		switch {
		case len(cands) == 0:
			continue
		case len(cands) > 1:
			out.Ambiguous = append(out.Ambiguous, Ambiguity{Name: n, Refs: roots, Candidates: cands, Reason: fmt.Sprintf("%d people with an address are named so", len(cands))})
		case len(roots) > 1:
			out.Ambiguous = append(out.Ambiguous, Ambiguity{Name: n, Refs: roots, Candidates: cands, Reason: fmt.Sprintf("%d accounts are named so", len(roots))})
		default:
			var ev []string
			for _, m := range members[cands[0]] {
				ev = append(ev, refs[m].names[n]...)
			}
			union(roots[0], cands[0], StageDisplayName, append(slices.Clone(refs[roots[0]].names[n]), ev...))
		}
	}

	// Canonical refs, and each alias's path to its canonical: its stage is
	// the weakest link on the way, its evidence the links' lines.
	adj := map[string][]int{}
	for i, l := range links {
		adj[l.a], adj[l.b] = append(adj[l.a], i), append(adj[l.b], i)
	}
	out.ByStage = map[string]int{}
	for _, k := range keys {
		if strings.HasPrefix(k, "person:") {
			out.Refs++
		}
	}
	for _, root := range slices.Sorted(maps.Keys(members)) {
		group := members[root]
		if slices.ContainsFunc(group, func(k string) bool { return strings.HasPrefix(k, "person:") }) {
			out.Persons++
		}
		if len(group) == 1 {
			continue
		}
		canon := canonical(group, refs)
		// Breadth first from the canonical ref over the links.
		via := map[string]int{canon: -1}
		queue := []string{canon}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, i := range adj[x] {
				y := links[i].a
				if y == x {
					y = links[i].b
				}
				if _, ok := via[y]; !ok {
					via[y] = i
					queue = append(queue, y)
				}
			}
		}
		for _, k := range slices.Sorted(slices.Values(group)) {
			if k == canon {
				continue
			}
			a := store.Alias{Alias: k, Canonical: canon, Confidence: 1}
			for x := k; via[x] >= 0; {
				l := links[via[x]]
				if c := stageConfidence[l.stage]; c < a.Confidence || a.Stage == "" {
					a.Stage, a.Confidence = l.stage, min(a.Confidence, c)
				}
				for _, e := range l.evidence {
					if !slices.Contains(a.Evidence, e) && len(a.Evidence) < 6 {
						a.Evidence = append(a.Evidence, e)
					}
				}
				if l.a == x {
					x = l.b
				} else {
					x = l.a
				}
			}
			out.Aliases = append(out.Aliases, a)
			out.ByStage[a.Stage]++
		}
	}
	return out
}

// canonical picks a person's most stable ref: an address (its own ref is
// the address) seen first, else an account seen first, else the smallest;
// for a commit, its full hash; for a file, its path.
func canonical(group []string, refs map[string]*identityRef) string {
	rank := func(k string) int {
		r := refs[k]
		_, v, _ := strings.Cut(k, ":")
		switch {
		case r.emails[v] || r.commit != "" && r.commit == v || r.path != "" && r.path == v:
			return 0
		case len(r.accounts) > 0:
			return 1
		}
		return 2
	}
	return slices.MinFunc(group, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), refs[a].seen.Compare(refs[b].seen), cmp.Compare(a, b))
	})
}

// ResolvedIdentities reports one pass of identity resolution over a client.
type ResolvedIdentities struct {
	Identities
	// Merged counts alias nodes merged into their canonical node this pass
	// (nodes made since the previous pass by processes that had not yet
	// seen an alias are merged again).
	Merged int `json:"merged"`
	// Unaliased are refs no longer aliased (a split, or a fact gone): the
	// documents naming them need reprocessing to separate their edges.
	Unaliased []string `json:"unaliased,omitempty"`
}

// ResolveStoredIdentities is ResolveIdentities over client's facts and
// decisions in st (returned too), the facts taken one at a time
// (store.EachIdentityFact) rather than held all at once.
func ResolveStoredIdentities(ctx context.Context, st store.Identities, client string) (Identities, []store.IdentityDecision, error) {
	refs := identityRefs{}
	if err := st.EachIdentityFact(ctx, client, func(f store.IdentityFact) error { refs.add(f); return nil }); err != nil {
		return Identities{}, nil, err
	}
	decisions, err := st.ListIdentityDecisions(ctx, client)
	if err != nil {
		return Identities{}, nil, err
	}
	return refs.resolve(decisions), decisions, nil
}

// ApplyIdentities resolves a client's identities (ResolveIdentities over
// its facts and decisions), records the aliases, and merges every alias's
// node into its canonical node. Idempotent: a repeated pass finds nothing
// to move; a crash part way is finished by the next.
func (k *KB) ApplyIdentities(ctx context.Context, client string, st store.Identities) (ResolvedIdentities, error) {
	var res ResolvedIdentities
	var err error
	if res.Identities, _, err = ResolveStoredIdentities(ctx, st, client); err != nil {
		return res, err
	}
	before, err := st.ListAliases(ctx, client)
	if err != nil {
		return res, err
	}
	now := map[string]string{}
	for _, a := range res.Aliases {
		now[a.Alias] = a.Canonical
	}
	for _, a := range before {
		if a.Stage != "" && now[a.Alias] == "" {
			res.Unaliased = append(res.Unaliased, a.Alias)
		}
	}
	// Unchanged aliases are not written again (a pass runs after every
	// burst of documents).
	var resolved []store.Alias
	for _, a := range before {
		if a.Stage != "" {
			resolved = append(resolved, a)
		}
	}
	want := slices.SortedFunc(slices.Values(res.Aliases), func(a, b store.Alias) int { return strings.Compare(a.Alias, b.Alias) })
	if fmt.Sprint(resolved) != fmt.Sprint(want) {
		if err := st.ReplaceAliases(ctx, client, res.Aliases); err != nil {
			return res, fmt.Errorf("record aliases: %w", err)
		}
	}
	for _, a := range res.Unaliased {
		k.resolver.learn(client, a, "")
	}
	// Every alias is learned before the first merge: a batch whose edges
	// meet one of these merges (KB.endsNow) then finds them all. Learned
	// each just before its own merge, a batch that met the first one still
	// read the next ones as unaliased, its retry met their merges, and the
	// batch was written a request at a time (one of three 100,000-document
	// runs, BENCHMARKS.md, forty-fourth round).
	for _, a := range res.Aliases {
		k.resolver.learn(client, a.Alias, a.Canonical)
	}
	g := k.graph.For(client)
	for _, a := range res.Aliases {
		m, err := g.MergeNode(ctx, a.Alias, a.Canonical)
		if err != nil {
			return res, fmt.Errorf("merge %s into %s: %w", a.Alias, a.Canonical, err)
		}
		if m.NodeDeleted {
			res.Merged++
		}
	}
	return res, nil
}
