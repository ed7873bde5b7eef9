package kb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/jervis-dev/jervis/kb/graph"
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
	// the namespace of a ref written in relationship syntax
	syntaxNamespace = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}$`)
	// type:id mentions: a lower-case namespace and a value starting with a
	// letter or digit and running to the next space, quote, bracket,
	// comma, semicolon or pipe (ids such as message ids carry $, = and %);
	// trailing punctuation is trimmed by mentionValue.
	mentionRE = regexp.MustCompile(`(?:^|[^\w:/.@-])([a-z][a-z0-9_]{1,31}):([\p{L}\p{N}][^\s"'` + "`" + `<>()\[\]{},;|]*)`)
)

// mentionSpans finds mentionRE's matches in line, as its
// FindAllStringSubmatchIndex does, by looking only at each colon (the
// regexp's scan of every line with one was most of ParseRelations' cost):
// [namespace start, namespace end, value start, value end] for each. A
// namespace is the whole run of word characters before its colon (what
// precedes it may not be one), so it is found by walking back from there.
func mentionSpans(line string) [][4]int {
	var out [][4]int
	end := 0 // where the previous match ended: the next may not start before
	for i := strings.IndexByte(line, ':'); i >= 0; {
		if m, ok := mentionAt(line, i, end); ok {
			out = append(out, m)
			end = m[3]
		}
		next := strings.IndexByte(line[i+1:], ':')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return out
}

// mentionAt matches mentionRE with its colon at i, starting at end or
// later.
func mentionAt(line string, i, end int) ([4]int, bool) {
	j := i
	for j > 0 && mentionNamespaceByte(line[j-1]) {
		j--
	}
	n := i - j
	switch {
	case n < 2 || n > 32 || line[j] < 'a' || line[j] > 'z':
		return [4]int{}, false
	case j == 0 && end > 0: // ^ is the line's start only
		return [4]int{}, false
	case j > 0 && (j-1 < end || mentionPrefixRefused(line[j-1])):
		return [4]int{}, false
	}
	r, w := utf8.DecodeRuneInString(line[i+1:])
	if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
		return [4]int{}, false
	}
	k := i + 1 + w
	for k < len(line) && !mentionValueEnd(line[k]) {
		k++
	}
	return [4]int{j, i, i + 1, k}, true
}

// mentionNamespaceByte: [a-z0-9_]. A namespace's run of them may follow
// no other word character (\w), so an upper-case letter before the colon
// is no namespace.
func mentionNamespaceByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}

// mentionPrefixRefused: what may not come before a namespace, [\w:/.@-]
// (a byte of a non-ASCII rune never is).
func mentionPrefixRefused(c byte) bool {
	return 'A' <= c && c <= 'Z' || mentionNamespaceByte(c) || strings.IndexByte(":/.@-", c) >= 0
}

// mentionValueEnd: what ends a value, [\s"'`<>()\[\]{},;|] (\s is ASCII's).
func mentionValueEnd(c byte) bool { return strings.IndexByte("\t\n\f\r \"'`<>()[]{},;|", c) >= 0 }

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// mentionValue trims what cannot end an id (sentence punctuation) from a
// mention's value.
func mentionValue(v string) string {
	return strings.TrimRightFunc(v, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

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
		for _, re := range syntaxREs {
			if strings.Count(line, re.needs) < re.times { // it cannot match: skip the scan
				continue
			}
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
		if !strings.Contains(line, ":") {
			continue
		}
		for _, m := range mentionSpans(line) {
			if overlaps(covered, m[0], m[3]) || notNamespace(line[m[0]:m[1]]) {
				continue
			}
			ref, err := NewRef(line[m[0]:m[1]], mentionValue(line[m[2]:m[3]]))
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

// syntaxREs are the relationship syntaxes in the order they claim text,
// each with a literal every match holds, and how many times: a line of C
// (p->next) or a diffstat (file | 3 +-) has one arrow or pipe, and the
// regular expression's scan of such lines was 2 % of a mailing list's drain.
var syntaxREs = []struct {
	*regexp.Regexp
	needs string
	times int
}{{bracketRE, "]->", 1}, {arrowRE, "->", 2}, {pipeRE, "|", 2}}

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
	if ns, val, ok := strings.Cut(raw, ":"); ok {
		// A namespace is a word and a value starts with a letter or digit:
		// "2016-04-20T11:22" in a log line, "fs.js:12" in a stack trace or
		// "C:\temp" in a table row are not refs.
		val = strings.TrimPrefix(val, ":")
		if !syntaxNamespace.MatchString(ns) || !startsWithWord(val) {
			return "", false
		}
		r, err := ParseRef(raw)
		return r.String(), err == nil
	}
	if main.Value != "" && normalizePart(raw, false) == main.Value {
		return main.String(), true
	}
	return "", false
}

// maxEdgeType is the longest edge type (edgeTypeExpr allows 64 characters).
const maxEdgeType = 64

// EdgeType turns a relationship name of any spelling into a valid edge type
// (lower-case ASCII letters, digits and _, starting with a letter): accents
// are folded ("Dépend de" → depend_de), every other run of characters that
// are not letters or digits becomes one _ ("Gantt: start-finish" →
// gantt_start_finish), and a name that starts with a digit is prefixed with
// rel_. A name longer than 64 characters, or with letters that have no ASCII
// form ("Связан с"), keeps a readable prefix and gets a hash of the whole
// name, so two names never become one type by accident. Only a name with no
// letter or digit at all is refused (graph.ErrInvalid).
func EdgeType(name string) (string, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if !meaningful(name) {
		return "", fmt.Errorf("%w: edge type %q has no letter or digit", graph.ErrInvalid, clip(name))
	}
	var b strings.Builder
	under, lost := false, false
	for _, r := range norm.NFD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r): // an accent, folded away
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if under && b.Len() > 0 {
				b.WriteByte('_')
			}
			under = false
			b.WriteRune(r)
		default:
			lost = lost || unicode.IsLetter(r) || unicode.IsNumber(r)
			under = true
		}
	}
	t := b.String()
	if t == "" || t[0] >= '0' && t[0] <= '9' {
		t = "rel_" + t
	}
	if lost || len(t) > maxEdgeType {
		sum := sha256.Sum256([]byte(name))
		t = strings.TrimRight(t[:min(len(t), maxEdgeType-9)], "_") + "_" + hex.EncodeToString(sum[:4])
	}
	return t, nil
}
