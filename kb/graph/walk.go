package graph

import (
	"iter"
	"slices"
)

// Step is one edge followed out of (or into) a frontier node during a walk.
type Step struct {
	Type  string // the edge's type
	Other string // the node it reaches
}

// Walk is the breadth-first traversal every backend runs for Neighbors, so
// that all of them return the same nodes in the same order under the same
// limits. start are the start nodes that exist (in the query's order).
// steps yields the edges of one direction out of the frontier — in
// frontier key order, then edge type and edge key — and is called for Out,
// then In, per level as q.Direction allows; edges of types q.EdgeTypes
// excludes are skipped here. The walk stops pulling steps as soon as
// q.Limit nodes are reached, so a hub costs no more than the nodes it
// contributes. It returns the nodes reached in the order reached, with
// their depths.
func Walk(q NeighborQuery, start []string, steps func(frontier []string, dir Direction) iter.Seq2[Step, error]) ([]string, map[string]int, error) {
	depth := map[string]int{}
	var keys []string
	visit := func(k string, d int) bool {
		if _, seen := depth[k]; !seen && len(keys) < q.Limit {
			depth[k] = d
			keys = append(keys, k)
			return true
		}
		return false
	}
	for _, k := range start {
		visit(k, 0)
	}
	frontier := slices.Clone(keys)
	for d := 1; d <= q.Depth && len(keys) < q.Limit && len(frontier) > 0; d++ {
		slices.Sort(frontier)
		var next []string
		for _, dir := range []Direction{Out, In} {
			if q.Direction != dir && q.Direction != Any {
				continue
			}
			for st, err := range steps(frontier, dir) {
				if err != nil {
					return nil, nil, err
				}
				if len(keys) >= q.Limit {
					break
				}
				if len(q.EdgeTypes) > 0 && !slices.Contains(q.EdgeTypes, st.Type) {
					continue
				}
				if visit(st.Other, d) {
					next = append(next, st.Other)
				}
			}
		}
		frontier = next
	}
	return keys, depth, nil
}
