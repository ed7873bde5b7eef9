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
	"unicode/utf8"

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
	requestRE = keywords{regexp.MustCompile(`(?i)\b(could you|can you|would you|please|review|sign[- ]off|approve|take a look|let me know|decide|need your)\b`),
		[]string{"could you", "can you", "would you", "please", "review", "sign", "approve", "take a look", "let me know", "decide", "need your"}}
	deadlineRE = keywords{regexp.MustCompile(`(?i)\b(by|before|until|due)\s+(?:the\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|end of (the )?(day|week|month)|eod|\d{1,2}(st|nd|rd|th)?)\b`),
		[]string{"by", "before", "until", "due"}}
	decisionRE = keywords{regexp.MustCompile(`(?i)\b(decide|decision|approve|approval|sign[- ]off|disagree|priority)\b`),
		[]string{"decide", "decision", "approv", "sign", "disagree", "priority"}}
	fyiRE = keywords{regexp.MustCompile(`(?i)\b(fyi|no action needed|for your information|newsletter|notice)\b`),
		[]string{"fyi", "no action needed", "for your information", "newsletter", "notice"}}
)

// keywords is a case-insensitive regexp with words (lower case) one of
// which each of its matches holds: an ASCII text holding none of them
// cannot match, and is not scanned (the scans were most of routing's
// cost). Other text is always scanned ((?i) folds a few non-ASCII letters
// to ASCII ones).
type keywords struct {
	re    *regexp.Regexp
	words []string
}

func (k keywords) may(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	lower := strings.ToLower(s)
	for _, w := range k.words {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// MatchString reports whether s holds a match.
func (k keywords) MatchString(s string) bool { return k.may(s) && k.re.MatchString(s) }

// FindString returns the first match in s, "" when none.
func (k keywords) FindString(s string) string {
	if !k.may(s) {
		return ""
	}
	return k.re.FindString(s)
}

// FindAllString returns up to n matches in s (n < 0: all).
func (k keywords) FindAllString(s string, n int) []string {
	if !k.may(s) {
		return nil
	}
	return k.re.FindAllString(s, n)
}

// Route decides, by rules, whether the document needs the executor: a
// request to one of users (or to anyone when users is empty) — a question,
// a review, an assignment, a deadline — or a decision to make goes
// READY_FOR_GPU; informational content and routine updates are DONE. The
// reason quotes what decided it.
func Route(shape pollers.Shape, d store.Document, users []string) (decision, reason string) {
	body := ownText(d.Normalized.Body)
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
	var b strings.Builder
	b.WriteString(shape.Summary)
	own := ownText(d.Normalized.Body)
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
	a := store.Asks{Of: shape.To, From: shape.From}
	for _, s := range sentences(ownText(d.Normalized.Body)) {
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
