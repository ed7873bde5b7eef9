// Package rules is the deterministic qualifier: no model. What a document
// means is its kind's to say (pollers.Kind.Shape: its node, its metadata
// edges with their evidence lines, whom it is addressed to); rules turns
// the shape into a knowledge-base ingest request (Structure), decides by
// rules whether the document needs the executor (Route), and writes the
// TaskMemory's summary and what the document asks (Summary, Asked). The
// relationship syntax and type:id mentions in the text are found by
// kb.Ingest itself (origin syntax).
package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers"
)

// Structure builds the ingest request of a document from its shape (its
// kind's: pollers.Kind.Shape): the shape's header lines are the header (a
// chunk of their own, which each metadata edge points at as its evidence),
// the body is the content, and the title goes with every chunk.
func Structure(shape pollers.Shape, d store.Document) kb.IngestRequest {
	props := shape.Props
	if props == nil {
		props = map[string]any{"title": d.Normalized.Title}
	}
	return kb.IngestRequest{
		Client: d.Client, MainNode: shape.Main, Props: props, Title: d.Normalized.Title, Header: strings.Join(shape.Lines, "\n"),
		Content: d.Normalized.Body, Relations: shape.Relations,
		SourceURN: d.SourceURN(), SourceType: string(d.SourceType), Kind: kb.KindBody, ObservedAt: d.ObservedAt,
	}
}

// person returns the ref of a person named by e-mail or user name.
func person(s string) string { return pollers.Person(s) }

// Routing decisions.
const (
	Done        = string(store.TaskDone)
	ReadyForGPU = string(store.TaskReadyForGPU)
)

var (
	requestRE = newKeywords(`(?i)\b(could you|can you|would you|please|review|sign[- ]off|approve|take a look|let me know|decide|need your)\b`,
		"could you", "can you", "would you", "please", "review", "sign", "approve", "take a look", "let me know", "decide", "need your")
	deadlineRE = newKeywords(`(?i)\b(by|before|until|due)\s+(?:the\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|end of (the )?(day|week|month)|eod|\d{1,2}(st|nd|rd|th)?)\b`,
		"by", "before", "until", "due")
	decisionRE = newKeywords(`(?i)\b(decide|decision|approve|approval|sign[- ]off|disagree|priority)\b`,
		"decide", "decision", "approv", "sign", "disagree", "priority")
	fyiRE = newKeywords(`(?i)\b(fyi|no action needed|for your information|newsletter|notice)\b`,
		"fyi", "no action needed", "for your information", "newsletter", "notice")
)

// keywords is a case-insensitive regexp that starts with \b and whose
// every match starts with one of words (lower case, ASCII). A match can
// start only where one of them does, after a word boundary: the regexp is
// tried there alone, anchored (at, which stops where a match can no longer
// go on), instead of scanning the whole text (the scans of Jira comments,
// where "by" and "please" are everywhere, were most of routing's cost).
// Only a text holding one of the two letters (?i) folds to ASCII ones —
// ſ (s) and the Kelvin sign (k) — is scanned whole; any other non-ASCII
// letter is a non-word character to \b, as to the regexp.
type keywords struct {
	re    *regexp.Regexp
	at    *regexp.Regexp // re anchored at the start
	words []string
	first *[256][]string // the words by their first letter, in either case
}

func newKeywords(expr string, words ...string) keywords {
	first := new([256][]string)
	for _, w := range words {
		if w == "" || w[0] < 'a' || w[0] > 'z' || strings.ToLower(w) != w {
			panic("rules: keyword " + w + " is not lower case, from a letter")
		}
		first[w[0]] = append(first[w[0]], w)
		first[w[0]-'a'+'A'] = first[w[0]]
	}
	return keywords{re: regexp.MustCompile(expr), at: regexp.MustCompile(`^(?:` + expr + `)`), words: words, first: first}
}

// foldsToASCII reports whether s holds a letter that (?i) matches to an
// ASCII one (unicode.SimpleFold: there are two). Two substring searches,
// not strings.ContainsAny, which decodes every rune of s: a second of
// the qualifier's CPU on the dev Jira corpus.
func foldsToASCII(s string) bool {
	return strings.Contains(s, "\u017f") || strings.Contains(s, "\u212a")
}

// wordByte: what \b counts as a word character (a byte of a non-ASCII
// letter is not one).
func wordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// next returns the first position from p on where one of k's words
// starts after a word boundary (compared in ASCII case only), -1 when
// there is none. Only the words of the letter there are tried.
func (k keywords) next(s string, p int) int {
	for ; p < len(s); p++ {
		ws := k.first[s[p]]
		if ws == nil || p > 0 && wordByte(s[p-1]) {
			continue
		}
		for _, w := range ws {
			if hasPrefixASCIIFold(s[p:], w) {
				return p
			}
		}
	}
	return -1
}

// hasPrefixASCIIFold reports whether s starts with lower (lower case,
// ASCII), ASCII letters in any case.
func hasPrefixASCIIFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// find returns up to n matches (n < 0: all) in s, left to right, as the
// regexp's FindAllStringIndex does.
func (k keywords) find(s string, n int) [][2]int {
	if foldsToASCII(s) {
		var out [][2]int
		for _, m := range k.re.FindAllStringIndex(s, n) {
			out = append(out, [2]int{m[0], m[1]})
		}
		return out
	}
	var out [][2]int
	for p := k.next(s, 0); p >= 0 && (n < 0 || len(out) < n); {
		if m := k.at.FindStringIndex(s[p:]); m != nil {
			out = append(out, [2]int{p, p + m[1]})
			p = k.next(s, p+max(m[1], 1))
			continue
		}
		p = k.next(s, p+1)
	}
	return out
}

// MatchString reports whether s holds a match.
func (k keywords) MatchString(s string) bool { return len(k.find(s, 1)) > 0 }

// FindString returns the first match in s, "" when none.
func (k keywords) FindString(s string) string {
	if m := k.find(s, 1); len(m) > 0 {
		return s[m[0][0]:m[0][1]]
	}
	return ""
}

// FindAllString returns up to n matches in s (n < 0: all).
func (k keywords) FindAllString(s string, n int) []string {
	var out []string
	for _, m := range k.find(s, n) {
		out = append(out, s[m[0]:m[1]])
	}
	return out
}

// Route decides, by rules, whether the document needs the executor: a
// request to one of users (or to anyone when users is empty) — a question,
// a review, an assignment, a deadline — or a decision to make goes
// READY_FOR_GPU; informational content and routine updates are DONE. The
// reason quotes what decided it.
func Route(shape pollers.Shape, d store.Document, users []string) (decision, reason string) {
	return route(shape, d, ownText(d.Normalized.Body), users)
}

// Reading is what the rules make of a document: Route's decision and
// reason, what it asks (Asked) and its summary (Summary).
type Reading struct {
	Decision, Reason string
	Asks             store.Asks
	Summary          string
}

// Read is Route, Asked and Summary at once, the document's own text
// (quoted lines and URLs left out) made once for the three.
func Read(shape pollers.Shape, d store.Document, users []string) Reading {
	own := ownText(d.Normalized.Body)
	var r Reading
	r.Decision, r.Reason = route(shape, d, own, users)
	r.Asks = asked(shape, own)
	r.Summary = summary(shape, own, r.Decision, r.Reason)
	return r
}

// route is Route with the body's own text, body.
func route(shape pollers.Shape, d store.Document, body string, users []string) (decision, reason string) {
	// To: a request, question or deadline counts; Cc: only a decision.
	to, cc := len(users) == 0, false
	for _, u := range users {
		for _, t := range shape.To {
			to = to || strings.EqualFold(person(t), person(u))
		}
		for _, c := range shape.Cc {
			cc = cc || strings.EqualFold(person(c), person(u))
		}
	}
	if shape.Assigned != "" && to && len(users) > 0 {
		return ReadyForGPU, shape.Assigned
	}
	if !shape.Conversational {
		return Done, "informational " + strings.ToLower(string(d.SourceType)) + " content"
	}
	if fyiRE.MatchString(body) && !deadlineRE.MatchString(body) {
		return Done, "informational: " + quote(fyiRE.FindString(body))
	}
	if !to && !cc {
		return Done, "not addressed to " + strings.Join(users, ", ")
	}
	if dec := decisionRE.FindString(body); dec != "" && (to || questionTo(body) != "") {
		return ReadyForGPU, "decision asked for: " + quote(sentenceWith(body, dec))
	}
	if !to {
		return Done, "copied on a message for someone else"
	}
	if q := questionTo(body); q != "" {
		return ReadyForGPU, "direct question: " + quote(q)
	}
	if r := requestRE.FindString(body); r != "" {
		if dl := deadlineRE.FindString(body); dl != "" {
			return ReadyForGPU, fmt.Sprintf("request (%s) with a deadline (%s)", quote(r), quote(dl))
		}
		return ReadyForGPU, "request: " + quote(sentenceWith(body, r))
	}
	return Done, "routine update: no request, question or decision"
}

var urlRE = regexp.MustCompile(`https?://\S+`)

// ownText is the message's own text: quoted lines (">") and URLs removed,
// so a question mark in a link or a request in the quoted mail does not
// count.
func ownText(body string) string {
	var b strings.Builder
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(strings.TrimSpace(line), ">") {
			b.WriteString(line)
		}
	}
	return urlRE.ReplaceAllString(b.String(), "")
}

// questionTo returns the first sentence of the body's own text (quoted
// lines excluded) that ends with a question mark.
func questionTo(body string) string {
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, ">") {
			continue
		}
		for _, s := range strings.SplitAfter(line, "?") {
			if strings.HasSuffix(s, "?") && len(s) > 8 {
				return strings.TrimSpace(s)
			}
		}
	}
	return ""
}

func quote(s string) string {
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return `"` + s + `"`
}

// Summary is the extractive context summary of TaskMemory: what the
// document is (its shape says), the request and open questions.
func Summary(shape pollers.Shape, d store.Document, decision, reason string) string {
	return summary(shape, ownText(d.Normalized.Body), decision, reason)
}

// summary is Summary with the body's own text, own.
func summary(shape pollers.Shape, own, decision, reason string) string {
	var b strings.Builder
	b.WriteString(shape.Summary)
	if q := questionTo(own); q != "" {
		fmt.Fprintf(&b, " Open question: %q.", q)
	}
	if r := requestRE.FindString(own); r != "" {
		fmt.Fprintf(&b, " Request: %s.", sentenceWith(own, r))
	}
	if dl := deadlineRE.FindString(own); dl != "" {
		fmt.Fprintf(&b, " Deadline: %s.", dl)
	}
	fmt.Fprintf(&b, " Routed %s: %s.", decision, reason)
	return b.String()
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// sentenceWith returns the sentence of text that contains word.
func sentenceWith(text, word string) string {
	i := strings.Index(text, word)
	if i < 0 {
		return word
	}
	start := strings.LastIndexAny(text[:i], ".!?\n") + 1
	end := strings.IndexAny(text[i:], ".!?\n")
	if end < 0 {
		end = len(text) - i
	}
	return strings.TrimSpace(text[start : i+end])
}

// Asked returns what d asks, by the same rules Route decides with: of whom
// (its shape's To) and from whom (its From).
func Asked(shape pollers.Shape, d store.Document) store.Asks {
	return asked(shape, ownText(d.Normalized.Body))
}

// asked is Asked with the body's own text, own.
func asked(shape pollers.Shape, own string) store.Asks {
	a := store.Asks{Of: shape.To, From: shape.From}
	for _, s := range sentences(own) {
		switch {
		case strings.HasSuffix(s, "?") && len(s) > 8:
			a.Questions = append(a.Questions, s)
		case decisionRE.MatchString(s):
			a.Decisions = append(a.Decisions, s)
		case requestRE.MatchString(s):
			a.Requests = append(a.Requests, s)
		}
		for _, dl := range deadlineRE.FindAllString(s, -1) {
			if !slices.Contains(a.Deadlines, dl) {
				a.Deadlines = append(a.Deadlines, dl)
			}
		}
	}
	return a
}

// sentences splits text into trimmed sentences at . ! ? and line ends,
// keeping the mark.
func sentences(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		rest := strings.TrimSpace(line)
		for rest != "" {
			i := strings.IndexAny(rest, ".!?")
			// A mark inside a word ("v1.2", "e.g.") does not end a sentence.
			for i >= 0 && i+1 < len(rest) && rest[i+1] != ' ' {
				j := strings.IndexAny(rest[i+1:], ".!?")
				if j < 0 {
					i = -1
					break
				}
				i += 1 + j
			}
			if i < 0 {
				i = len(rest) - 1
			}
			if s := strings.TrimSpace(rest[:i+1]); s != "" {
				out = append(out, s)
			}
			rest = strings.TrimSpace(rest[i+1:])
		}
	}
	return out
}
