package kb

import (
	"regexp"
	"strings"
)

// Relation is a relationship between two refs. Type is lower-case.
type Relation struct {
	From string `json:"from"`
	Type string `json:"type"`
	To   string `json:"to"`
}

// Found is a relationship or mention found in text, with the byte offset of
// the line it was found on (its evidence).
type Found struct {
	Relation
	Offset int
}

// Mention is a type:id ref found in text outside relationship syntax.
type Mention struct {
	Ref    Ref
	Offset int
}

// Limits that bound the work one document can cause.
const (
	maxLineScan  = 4096   // bytes of a line searched for syntax
	maxFound     = 10_000 // relationships and mentions per document
	edgeTypeExpr = `[A-Za-z][A-Za-z0-9_]{0,63}`
)

var (
	// a -[EDGE]-> b
	bracketRE = regexp.MustCompile(`(\S+)\s*-\[\s*(` + edgeTypeExpr + `)\s*\]->\s*(\S+)`)
	// a->EDGE->b, spaces allowed around the arrows
	arrowRE = regexp.MustCompile(`(\S+?)\s*->\s*(` + edgeTypeExpr + `)\s*->\s*(\S+)`)
	// a|EDGE|b
	pipeRE     = regexp.MustCompile(`([^\s|]+)\s*\|\s*(` + edgeTypeExpr + `)\s*\|\s*([^\s|]+)`)
	edgeTypeRE = regexp.MustCompile(`^` + edgeTypeExpr + `$`)
	// type:id mentions: a lower-case namespace and a value starting and
	// ending with a letter or digit
	mentionRE = regexp.MustCompile(`(?:^|[^\w:/.@-])([a-z][a-z0-9_]{1,31}):([\p{L}\p{N}][\p{L}\p{N}._@#+/-]*[\p{L}\p{N}]|[\p{L}\p{N}])`)
)

// notNamespace reports "x:" prefixes that are not node types.
func notNamespace(ns string) bool {
	switch ns {
	case "http", "https", "ftp", "mailto", "tel", "data", "javascript", "re", "fw", "fwd", "aw", "sv", "note", "urn":
		return true
	}
	return false
}

// ParseRelations finds relationship syntax and type:id mentions in text:
//
//	pipe     a|EDGE|b
//	arrow    a->EDGE->b
//	bracket  a -[EDGE]-> b
//	block    relationships: [ "a|EDGE|b", "c->EDGE->d", ... ]  (items in any of the above)
//
// An endpoint is a ref (namespace:value) or, as short-hand, the main node's
// value alone ("TASK-123" for main node jira:task-123). Anything else is not
// a relationship. Quotes, commas and brackets around endpoints are ignored.
// Mentions inside relationship syntax are not reported again. Work is
// bounded: lines are scanned up to maxLineScan bytes, and at most maxFound
// results are returned.
func ParseRelations(text string, main Ref) (rels []Found, mentions []Mention) {
	offset := 0
	for line := range strings.Lines(text) {
		lineStart := offset
		offset += len(line)
		if len(line) > maxLineScan {
			line = line[:maxLineScan]
		}
		covered := make([][2]int, 0, 2)
		for _, re := range []*regexp.Regexp{bracketRE, arrowRE, pipeRE} {
			for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
				if overlaps(covered, m[0], m[1]) {
					continue
				}
				from, ok1 := endpoint(line[m[2]:m[3]], main)
				to, ok2 := endpoint(line[m[6]:m[7]], main)
				if !ok1 || !ok2 {
					continue
				}
				covered = append(covered, [2]int{m[0], m[1]})
				rels = append(rels, Found{Relation{From: from, Type: strings.ToLower(line[m[4]:m[5]]), To: to}, lineStart})
				if len(rels)+len(mentions) >= maxFound {
					return rels, mentions
				}
			}
		}
		for _, m := range mentionRE.FindAllStringSubmatchIndex(line, -1) {
			if overlaps(covered, m[2], m[5]) || notNamespace(line[m[2]:m[3]]) {
				continue
			}
			ref, err := NewRef(line[m[2]:m[3]], line[m[4]:m[5]])
			if err != nil {
				continue
			}
			mentions = append(mentions, Mention{Ref: ref, Offset: lineStart})
			if len(rels)+len(mentions) >= maxFound {
				return rels, mentions
			}
		}
	}
	return rels, mentions
}

func overlaps(spans [][2]int, lo, hi int) bool {
	for _, s := range spans {
		if lo < s[1] && s[0] < hi {
			return true
		}
	}
	return false
}

// endpoint turns a raw endpoint into a canonical ref string.
func endpoint(raw string, main Ref) (string, bool) {
	raw = strings.Trim(raw, "\"'`,;[](){}<>")
	if raw == "" {
		return "", false
	}
	if strings.Contains(raw, ":") {
		r, err := ParseRef(raw)
		return r.String(), err == nil
	}
	if main.Value != "" && normalizePart(raw, false) == main.Value {
		return main.String(), true
	}
	return "", false
}
