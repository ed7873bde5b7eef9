// Package rules is the deterministic qualifier: no model. Structure turns a
// source document into a knowledge-base ingest request whose metadata
// relations come from the source's structured fields (origin metadata,
// confidence 1); the relationship syntax and type:id mentions in the text
// are found by kb.Ingest itself (origin syntax). Route decides by rules
// whether a document needs the executor.
//
// Every metadata relation names the header line it comes from as its
// evidence, and the content handed to Ingest starts with those lines, so
// each edge points at the chunk that states it.
package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

// Namespaces are the node types the rules produce. Prose mentions (type:id)
// become nodes only in these and the ones a client declares; everything else
// that looks like one in ordinary text ("inet addr:10.0.0.1", "packets:42")
// stays text.
var Namespaces = []string{"email", "person", "jira", "project", "label", "version", "commit", "branch", "file", "page", "space", "link"}

// LinkRef returns the ref of a link's node (kb.BoundedRef: a long URL keeps
// a prefix and a hash of the whole, so it stays a valid ref).
func LinkRef(url string) string { return kb.BoundedRef("link", url) }

// emailRef returns the ref of a message's node by its Message-ID.
func emailRef(id string) string { return kb.BoundedRef("email", id) }

// MainNode returns the ref of a document's own node.
func MainNode(d store.Document) string {
	m := d.Normalized.Metadata
	switch d.SourceType {
	case store.SourceEmail:
		return emailRef(d.ExternalID)
	case store.SourceJira:
		return "jira:" + d.ExternalID
	case store.SourceConfluence:
		return "page:" + d.Normalized.Title
	case store.SourceGit:
		if b, ok := m["branch"].(string); ok && strings.HasPrefix(d.ExternalID, "branch:") {
			return "branch:" + b
		}
		return "commit:" + d.ExternalID
	}
	return "file:" + d.ExternalID
}

// person returns the ref of a person named by e-mail or user name.
func person(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "<"); i >= 0 && strings.HasSuffix(s, ">") {
		s = s[i+1 : len(s)-1]
	}
	return "person:" + strings.ToLower(s)
}

// header collects "Key: value" lines and the relations they support.
type header struct {
	lines []string
	rels  []kb.MetaRelation
}

func (h *header) line(key, value string) string {
	l := key + ": " + value
	h.lines = append(h.lines, l)
	return l
}

func (h *header) rel(from, typ, to, evidence string) {
	if strings.TrimSpace(to) == "" || strings.HasSuffix(to, ":") {
		return
	}
	h.rels = append(h.rels, kb.MetaRelation{From: from, Type: typ, To: to, Evidence: evidence})
}

func strs(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case string:
		return []string{x}
	}
	return nil
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

var fixesRE = regexp.MustCompile(`(?i)\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?)\s+([A-Z][A-Z0-9]{1,9}-[0-9]+)`)

// Structure builds the ingest request of a document for client.
func Structure(d store.Document) kb.IngestRequest {
	main := MainNode(d)
	m := d.Normalized.Metadata
	var h header
	props := map[string]any{"title": d.Normalized.Title}
	switch d.SourceType {
	case store.SourceEmail:
		h.line("Subject", d.Normalized.Title)
		if f := str(m, "from"); f != "" {
			h.rel(main, "sent_by", person(f), h.line("From", str(m, "fromName")))
		}
		for _, to := range strs(m["to"]) {
			h.rel(main, "sent_to", person(to), h.line("To", to))
		}
		for _, cc := range strs(m["cc"]) {
			h.rel(main, "cc", person(cc), h.line("Cc", cc))
		}
		replyChain(&h, main, str(m, "inReplyTo"), strs(m["references"]))
		props["date"] = m["date"]
	case store.SourceJira:
		h.line("Issue", d.Normalized.Title)
		for _, f := range []struct{ key, edge string }{{"assignee", "assigned_to"}, {"reporter", "reported_by"}} {
			if v := str(m, f.key); v != "" {
				h.rel(main, f.edge, person(v), h.line(strings.ToUpper(f.key[:1])+f.key[1:], v))
			}
		}
		if p := str(m, "project"); p != "" {
			h.rel(main, "in_project", "project:"+p, h.line("Project", p))
		}
		for _, l := range strs(m["labels"]) {
			h.rel(main, "labeled", "label:"+l, h.line("Label", l))
		}
		for _, v := range strs(m["fixVersions"]) {
			h.rel(main, "fix_version", "version:"+v, h.line("Fix version", v))
		}
		for _, l := range issueLinks(m["issueLinks"]) {
			ev := h.line("Link", l.Phrase+" "+l.Key)
			typ, err := kb.EdgeType(l.Type) // "Gantt: start-finish" → gantt_start_finish
			if err != nil {
				typ = l.Type // kb.Ingest leaves it out, with a warning
			}
			if l.Direction == "inward" {
				h.rel("jira:"+l.Key, typ, main, ev)
			} else {
				h.rel(main, typ, "jira:"+l.Key, ev)
			}
		}
		for _, c := range comments(m["comments"]) {
			if c != "" {
				h.rel(person(c), "commented_on", main, h.line("Comment by", c))
			}
		}
		props["status"], props["key"] = m["status"], m["key"]
	case store.SourceGit:
		if strings.HasPrefix(d.ExternalID, "branch:") {
			h.rel(main, "points_to", "commit:"+str(m, "head"), h.line("Head", str(m, "head")))
			break
		}
		h.line("Commit", d.ExternalID)
		if a := str(m, "author"); a != "" {
			h.rel(main, "authored_by", person(a), h.line("Author", a))
		}
		for _, p := range strs(m["parents"]) {
			h.rel(main, "parent", "commit:"+p, h.line("Parent", p))
		}
		for _, f := range files(m["files"]) {
			h.rel(main, "modifies", "file:"+f, h.line("File", f))
		}
		fixed := map[string]bool{}
		for _, mm := range fixesRE.FindAllStringSubmatch(d.Normalized.Body, -1) {
			fixed[strings.ToUpper(mm[1])] = true
		}
		for _, k := range strs(m["issueKeys"]) {
			edge := "mentions"
			if fixed[k] {
				edge = "fixes"
			}
			h.rel(main, edge, "jira:"+k, h.line("Issue", k))
		}
	case store.SourceConfluence:
		h.line("Page", d.Normalized.Title)
		if a := str(m, "author"); a != "" {
			h.rel(main, "authored_by", person(a), h.line("Author", a))
		}
		if sp := str(m, "space"); sp != "" {
			h.rel(main, "in_space", "space:"+sp, h.line("Space", sp))
		}
		if p := str(m, "parent"); p != "" {
			h.rel(main, "child_of", "page:"+p, h.line("Parent", p))
		}
		for _, l := range strs(m["pageLinks"]) {
			h.rel(main, "links_to", "page:"+l, h.line("Links to", l))
		}
	default:
		h.line("File", d.ExternalID)
	}
	content := strings.Join(h.lines, "\n") + "\n\n" + d.Normalized.Body
	return kb.IngestRequest{
		Client: d.Client, MainNode: main, Props: props, Content: content, Relations: h.rels,
		SourceURN: string(d.SourceType) + ":" + d.ExternalID, SourceType: string(d.SourceType), Kind: "body", ObservedAt: d.ObservedAt,
	}
}

// maxChain bounds the reply edges one message's References header adds.
const maxChain = 50

// replyChain adds an email's reply edges: to its parent (In-Reply-To, or
// the last of References), and along the chain of ancestors References
// records, each to the one before it, so a thread whose middle message is
// missing stays connected; and in_thread to the thread's first message.
func replyChain(h *header, main, inReplyTo string, refs []string) {
	var refsLine string
	references := func() string { // the References line, written once
		if refsLine == "" {
			refsLine = h.line("References", strings.Join(refs, " "))
		}
		return refsLine
	}
	parent := inReplyTo
	if parent == "" && len(refs) > 0 {
		parent = refs[len(refs)-1]
	}
	if parent != "" && emailRef(parent) != main {
		if inReplyTo != "" {
			h.rel(main, "replies_to", emailRef(parent), h.line("In-Reply-To", parent))
		} else {
			h.rel(main, "replies_to", emailRef(parent), references())
		}
	}
	if len(refs) == 0 {
		return
	}
	chain := refs
	if i := slices.Index(refs, parent); i >= 0 {
		chain = refs[:i+1]
	}
	chain = chain[max(0, len(chain)-maxChain):]
	for i := len(chain) - 1; i > 0; i-- {
		if chain[i] != chain[i-1] {
			h.rel(emailRef(chain[i]), "replies_to", emailRef(chain[i-1]), references())
		}
	}
	h.rel(main, "in_thread", emailRef(refs[0]), h.line("Thread", refs[0]))
}

type issueLink struct{ Type, Direction, Phrase, Key string }

// issueLinks reads the issue links of a document read from the store
// (metadata decoded from JSON).
func issueLinks(v any) []issueLink {
	var out []issueLink
	x, _ := v.([]any)
	for _, e := range x {
		if mm, ok := e.(map[string]any); ok {
			out = append(out, issueLink{str(mm, "type"), str(mm, "direction"), str(mm, "phrase"), str(mm, "key")})
		}
	}
	return out
}

func comments(v any) []string {
	var out []string
	if x, ok := v.([]any); ok {
		for _, e := range x {
			if mm, ok := e.(map[string]any); ok {
				out = append(out, str(mm, "author"))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func files(v any) []string {
	var out []string
	if x, ok := v.([]any); ok {
		for _, e := range x {
			if mm, ok := e.(map[string]any); ok {
				out = append(out, str(mm, "path"))
			}
		}
	}
	return out
}

// Routing decisions.
const (
	Done        = string(store.TaskDone)
	ReadyForGPU = string(store.TaskReadyForGPU)
)

var (
	requestRE  = regexp.MustCompile(`(?i)\b(could you|can you|would you|please|review|sign[- ]off|approve|take a look|let me know|decide|need your)\b`)
	deadlineRE = regexp.MustCompile(`(?i)\b(by|before|until|due)\s+(?:the\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|end of (the )?(day|week|month)|eod|\d{1,2}(st|nd|rd|th)?)\b`)
	decisionRE = regexp.MustCompile(`(?i)\b(decide|decision|approve|approval|sign[- ]off|disagree|priority)\b`)
	fyiRE      = regexp.MustCompile(`(?i)\b(fyi|no action needed|for your information|newsletter|notice)\b`)
)

// Route decides, by rules, whether the document needs the executor: a
// request to one of users (or to anyone when users is empty) — a question,
// a review, an assignment, a deadline — or a decision to make goes
// READY_FOR_GPU; informational content and routine updates are DONE. The
// reason quotes what decided it.
func Route(d store.Document, users []string) (decision, reason string) {
	m := d.Normalized.Metadata
	body := ownText(d.Normalized.Body)
	// To: a request, question or deadline counts; Cc: only a decision.
	to, cc := len(users) == 0, false
	var direct, copied []string
	switch d.SourceType {
	case store.SourceEmail:
		direct, copied = strs(m["to"]), strs(m["cc"])
	case store.SourceJira:
		direct = []string{str(m, "assignee")}
	}
	for _, u := range users {
		for _, t := range direct {
			to = to || strings.EqualFold(person(t), person(u))
		}
		for _, c := range copied {
			cc = cc || strings.EqualFold(person(c), person(u))
		}
	}
	if d.SourceType == store.SourceJira {
		if st := strings.ToLower(str(m, "status")); st != "done" && st != "closed" && str(m, "assignee") != "" && to && len(users) > 0 {
			return ReadyForGPU, fmt.Sprintf("open issue (%s) assigned to %s", str(m, "status"), str(m, "assignee"))
		}
	}
	if d.SourceType != store.SourceEmail && d.SourceType != store.SourceJira {
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
// document is, its key fields, the request and open questions.
func Summary(d store.Document, decision, reason string) string {
	m := d.Normalized.Metadata
	var b strings.Builder
	switch d.SourceType {
	case store.SourceEmail:
		fmt.Fprintf(&b, "Email %q from %s to %s", d.Normalized.Title, str(m, "fromName"), strings.Join(strs(m["to"]), ", "))
		if dt := str(m, "date"); dt != "" {
			fmt.Fprintf(&b, " on %s", dt)
		}
		b.WriteString(".")
	case store.SourceJira:
		fmt.Fprintf(&b, "Jira issue %s (%s), assigned to %s, reported by %s.", d.Normalized.Title, str(m, "status"), or(str(m, "assignee"), "nobody"), or(str(m, "reporter"), "unknown"))
	case store.SourceGit:
		fmt.Fprintf(&b, "Commit %q by %s.", d.Normalized.Title, str(m, "author"))
	case store.SourceConfluence:
		fmt.Fprintf(&b, "Confluence page %q in space %s by %s.", d.Normalized.Title, str(m, "space"), str(m, "author"))
	default:
		fmt.Fprintf(&b, "File %s: %q.", d.ExternalID, d.Normalized.Title)
	}
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

// Asked returns what d asks, by the same rules Route decides with.
func Asked(d store.Document) store.Asks {
	m := d.Normalized.Metadata
	var a store.Asks
	switch d.SourceType {
	case store.SourceEmail:
		a.Of, a.From = strs(m["to"]), or(str(m, "fromName"), str(m, "from"))
	case store.SourceJira:
		if as := str(m, "assignee"); as != "" {
			a.Of = []string{as}
		}
		a.From = str(m, "reporter")
	default:
		a.From = str(m, "author")
	}
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
