package eval

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
)

// Identities is identity resolution measured against what the data
// carries: Git's name↔address pairs and Jira's display names.
type Identities struct {
	Refs        int            `json:"refs"`    // person refs the sources name
	Persons     int            `json:"persons"` // after resolution
	Aliases     int            `json:"aliases"`
	ByStage     map[string]int `json:"byStage"`
	Ambiguous   int            `json:"ambiguous"`
	PersonNodes int            `json:"personNodes"` // person nodes in the graph
	// GitMultiAddress: every Git author name written with several
	// addresses (a full name) resolves to one person.
	GitMultiAddress Recall `json:"gitMultiAddress"`
	// JiraGit: every Jira account whose display name is exactly one Git
	// author's name (and no other account's) is that person.
	JiraGit Recall `json:"jiraGit"`
	// AssigneeCommits: every issue whose assignee wrote commits reaches one
	// of them within two hops (issue → person ← commit).
	AssigneeCommits Recall `json:"assigneeCommits"`
	// Merges are the aliases made, "alias → canonical (stage)", for review.
	Merges []string `json:"merges,omitempty"`
}

func (r *Report) identities(ctx context.Context, env Env, g graph.Graph) error {
	facts, err := env.Store.ListIdentityFacts(ctx, env.Client)
	if err != nil || len(facts) == 0 {
		return err
	}
	aliases, err := env.Store.ListAliases(ctx, env.Client)
	if err != nil {
		return err
	}
	decisions, err := env.Store.ListIdentityDecisions(ctx, env.Client)
	if err != nil {
		return err
	}
	r.Identities.Ambiguous = len(kb.ResolveIdentities(facts, decisions).Ambiguous)
	canon := map[string]string{}
	id := &r.Identities
	id.ByStage = map[string]int{}
	for _, a := range aliases {
		canon[a.Alias] = a.Canonical
		id.Aliases++
		id.ByStage[a.Stage]++
		id.Merges = append(id.Merges, a.Alias+" → "+a.Canonical+" ("+a.Stage+")")
	}
	person := func(ref string) string {
		if c, ok := canon[ref]; ok {
			return c
		}
		return ref
	}
	refs, persons := map[string]bool{}, map[string]bool{}
	gitNames := map[string]map[string]bool{}  // author name → refs
	jiraNames := map[string]map[string]bool{} // display name → account refs
	commitsBy := map[string]bool{}            // persons who wrote commits
	assignee := map[string]string{}           // issue → assignee ref (facts' first account)
	for _, f := range facts {
		if !strings.HasPrefix(f.Ref, "person:") {
			continue
		}
		refs[f.Ref], persons[person(f.Ref)] = true, true
		add := func(m map[string]map[string]bool) {
			if m[f.Value] == nil {
				m[f.Value] = map[string]bool{}
			}
			m[f.Value][f.Ref] = true
		}
		switch {
		case strings.HasPrefix(f.Source, "commit:") && f.Kind == store.FactName && strings.HasPrefix(f.Evidence, "Author: "):
			add(gitNames)
			commitsBy[person(f.Ref)] = true
		case strings.HasPrefix(f.Source, "jira:") && f.Kind == store.FactName:
			add(jiraNames)
		}
	}
	id.Refs, id.Persons = len(refs), len(persons)
	for _, n := range slices.Sorted(maps.Keys(gitNames)) {
		rs := slices.Sorted(maps.Keys(gitNames[n]))
		if len(rs) < 2 || len(strings.Fields(n)) < 2 {
			continue
		}
		one := true
		for _, x := range rs[1:] {
			one = one && person(x) == person(rs[0])
		}
		id.GitMultiAddress.add(one, n)
	}
	for _, n := range slices.Sorted(maps.Keys(jiraNames)) {
		accounts, authors := jiraNames[n], gitNames[n]
		if len(accounts) != 1 || len(authors) == 0 || len(strings.Fields(n)) < 2 {
			continue
		}
		authorPersons := map[string]bool{}
		for x := range authors {
			authorPersons[person(x)] = true
		}
		if len(authorPersons) != 1 {
			continue
		}
		for a := range accounts {
			id.JiraGit.add(authorPersons[person(a)], n)
		}
	}
	// Assignees: the issues' assigned_to edges, read from the graph.
	nodes, err := listAll(ctx, g, "jira")
	if err != nil {
		return err
	}
	for _, n := range nodes {
		hood, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{n}, Depth: 1, Direction: graph.Out, EdgeTypes: []string{"assigned_to"}})
		if err != nil {
			return err
		}
		for _, v := range hood.Nodes {
			if v.Depth == 1 && strings.HasPrefix(v.Key, "person:") {
				assignee[n] = v.Key
			}
		}
	}
	for _, issue := range slices.Sorted(maps.Keys(assignee)) {
		if !commitsBy[person(assignee[issue])] {
			continue
		}
		hood, err := g.Neighbors(ctx, graph.NeighborQuery{Start: []string{issue}, Depth: 2, EdgeTypes: []string{"assigned_to", "authored_by"}, Limit: 10_000})
		if err != nil {
			return err
		}
		id.AssigneeCommits.add(slices.ContainsFunc(hood.Nodes, func(v graph.Visit) bool { return strings.HasPrefix(v.Key, "commit:") }), issue)
	}
	people, err := listAll(ctx, g, "person")
	id.PersonNodes = len(people)
	return err
}

// listAll lists the keys of every node of a type.
func listAll(ctx context.Context, g graph.Graph, typ string) ([]string, error) {
	var out []string
	after := ""
	for {
		ns, err := g.ListNodes(ctx, graph.NodeQuery{Type: typ, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			out = append(out, n.Key)
		}
		if len(ns) < 1000 {
			return out, nil
		}
		after = ns[len(ns)-1].Key
	}
}
