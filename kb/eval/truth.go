package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Source types of the items Truth counts (as store.SourceType names them).
const (
	Jira       = "JIRA"
	Email      = "EMAIL"
	Git        = "GIT"
	Confluence = "CONFLUENCE"
	File       = "FILE"
)

// Truth is what a corpus says about itself: the labels it carries, read
// from the raw files with parsing of its own (JSON, mail headers, Git
// objects), never through the pipeline's parsers. Feed it every file before
// the pipeline sees it (File), and every repository (Repository).
type Truth struct {
	// Strip names the Jira link types removed from the data before import
	// (so that the graph cannot give away what search is measured on).
	Strip []string

	files    int
	items    map[string]int // by source type
	ids      map[string]map[string]bool
	repeats  map[string]int // items whose ID repeats an earlier one's
	issues   map[string]*issue
	links    map[link]bool
	dups     map[pair]bool
	messages map[string]*message
	commits  map[string]string // hash → message
	notes    []string
}

type issue struct {
	Key, Summary, Text string
}

// link is an issue link as its outward side reads: From <type> To.
type link struct{ From, To, Type string }

// pair is a duplicate issue and the one it duplicates.
type pair struct{ Duplicate, Original string }

type message struct {
	ID         string
	InReplyTo  string
	References []string
}

// NewTruth returns an empty Truth that strips the Jira link types named.
func NewTruth(strip ...string) *Truth {
	return &Truth{Strip: strip, items: map[string]int{}, ids: map[string]map[string]bool{}, repeats: map[string]int{},
		issues: map[string]*issue{}, links: map[link]bool{}, dups: map[pair]bool{}, messages: map[string]*message{}, commits: map[string]string{}}
}

// item counts one item of source; id "" is an item with no ID of its own
// (a message without a Message-ID).
func (t *Truth) item(source, id string) {
	t.items[source]++
	if id == "" {
		return
	}
	if t.ids[source] == nil {
		t.ids[source] = map[string]bool{}
	}
	if t.ids[source][id] {
		t.repeats[source]++
	}
	t.ids[source][id] = true
}

// Note records something about the input worth reporting (a file that
// could not be read for the labels).
func (t *Truth) Note(s string) { t.notes = append(t.notes, s) }

// maxFile bounds what File reads of a JSON or text file.
const maxFile = 256 << 20

// File records the labels of one file, named as the pipeline will see it
// (a mailbox is read as a stream, message by message).
func (t *Truth) File(name string, r io.Reader) error {
	t.files++
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		raw, err := io.ReadAll(io.LimitReader(r, maxFile))
		if err != nil {
			return fmt.Errorf("eval: %s: %w", name, err)
		}
		t.json(name, raw)
	case ".eml":
		raw, err := io.ReadAll(io.LimitReader(r, maxFile))
		if err != nil {
			return fmt.Errorf("eval: %s: %w", name, err)
		}
		t.message(raw)
	case ".mbox":
		return eachMessage(r, t.message)
	case ".xhtml", ".html", ".htm": // a Confluence storage export, named by its title
		title := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		sum := sha256.Sum256([]byte(title))
		t.item(Confluence, fmt.Sprintf("export:%x", sum[:8]))
	case ".txt":
		br := bufio.NewReader(r)
		if head, _ := br.Peek(4096); archiveHead.Match(head) { // a list archive in mbox form
			return eachMessage(br, t.message)
		}
		t.item(File, filepath.ToSlash(name))
	case ".md", ".markdown":
		t.item(File, filepath.ToSlash(name))
	}
	return nil
}

// archiveHead is how a mailbox starts: a "From " line, then a header field.
var archiveHead = regexp.MustCompile(`^From \S+.*\r?\n[A-Za-z][A-Za-z0-9-]*:`)

// StripLinks returns a Jira REST payload without the issue links of the
// named types (in any case), and whether it removed any; other payloads,
// and numbers, come back as they were.
func StripLinks(raw []byte, types ...string) ([]byte, bool) {
	if !mayLink(raw, types) {
		return raw, false
	}
	doc, list, ok := jiraItems(raw)
	if !ok {
		return raw, false
	}
	stripped := false
	for _, x := range list {
		fields, _ := x.(map[string]any)["fields"].(map[string]any)
		ls, _ := fields["issuelinks"].([]any)
		kept := ls[:0:0]
		for _, l := range ls {
			typ, _ := l.(map[string]any)["type"].(map[string]any)
			name, _ := typ["name"].(string)
			if slices.ContainsFunc(types, func(s string) bool { return strings.EqualFold(s, name) }) {
				stripped = true
				continue
			}
			kept = append(kept, l)
		}
		if len(kept) != len(ls) {
			fields["issuelinks"] = kept
		}
	}
	if !stripped {
		return raw, false
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return raw, false
	}
	return out, true
}

// linkNames is what mayLink reads of a payload: the link types' names of
// an issue, of a search response's issues, or of an array's.
type linkNames struct {
	Fields *struct {
		IssueLinks []struct {
			Type struct {
				Name string `json:"name"`
			} `json:"type"`
		} `json:"issuelinks"`
	} `json:"fields"`
	Issues []linkNames `json:"issues"`
}

// mayLink reports whether raw may hold a link of one of the types: false
// only when its link types' names, read without the rest of the payload,
// name none of them. Decoding the whole payload into maps, and most Jira
// issues have no such link, was most of the time eval's import took.
func mayLink(raw []byte, types []string) bool {
	if !spelled(raw, types) {
		return false
	}
	var items []linkNames
	if b := bytes.TrimLeft(raw, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(raw, &items) != nil {
			return true // let jiraItems judge it
		}
	} else {
		var one linkNames
		if json.Unmarshal(raw, &one) != nil {
			return true
		}
		items = append(one.Issues, one)
	}
	for _, it := range items {
		if it.Fields == nil {
			continue
		}
		for _, l := range it.Fields.IssueLinks {
			if slices.ContainsFunc(types, func(s string) bool { return strings.EqualFold(s, l.Type.Name) }) {
				return true
			}
		}
	}
	return false
}

// spelled reports whether raw may spell one of the names, in any case,
// as JSON would: false only when raw holds none of them in ASCII case,
// no \u escape (one may spell a letter) and neither of the two letters
// that fold to an ASCII one (U+017F, U+212A). An issue's payload is read
// this way first: decoding even its link types alone was a quarter of
// eval's import.
func spelled(raw []byte, names []string) bool {
	if bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte("\u017f")) || bytes.Contains(raw, []byte("\u212a")) {
		return true
	}
	for _, name := range names {
		if name == "" || containsASCIIFold(raw, name) {
			return true
		}
		for i := 0; i < len(name); i++ {
			if name[i] >= utf8.RuneSelf {
				return true // not compared here
			}
		}
	}
	return false
}

// containsASCIIFold reports whether b holds w (not empty, ASCII) in any
// case: each place w's first letter starts, in either case, is compared.
func containsASCIIFold(b []byte, w string) bool {
	lo, up := w[0], w[0]
	if c := w[0] | 0x20; 'a' <= c && c <= 'z' {
		lo, up = c, c&^0x20
	}
	for _, first := range []byte{lo, up} { // a non-letter's twice: no harm
		for at := 0; ; at++ {
			i := bytes.IndexByte(b[at:], first)
			if i < 0 || at+i+len(w) > len(b) {
				break
			}
			at += i
			if bytes.EqualFold(b[at:at+len(w)], []byte(w)) {
				return true
			}
		}
	}
	return false
}

// jiraItems decodes a JSON payload (numbers kept as written) and returns
// its Jira issues: objects with a key and fields, from one issue, a search
// response or an array.
func jiraItems(raw []byte) (doc any, issues []any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, false
	}
	var list []any
	switch d := doc.(type) {
	case []any:
		list = d
	case map[string]any:
		if is, ok := d["issues"].([]any); ok {
			list = is
		} else {
			list = []any{d}
		}
	}
	for _, x := range list {
		obj, _ := x.(map[string]any)
		key, _ := obj["key"].(string)
		if fields, _ := obj["fields"].(map[string]any); key != "" && fields != nil {
			issues = append(issues, obj)
		}
	}
	return doc, issues, true
}

// json records a JSON payload: Jira issues (their text, links between them
// by their outward reading, the Strip types as duplicate pairs) or
// Confluence pages.
func (t *Truth) json(name string, raw []byte) {
	doc, list, ok := jiraItems(raw)
	if !ok {
		t.notes = append(t.notes, name+": not JSON")
		return
	}
	if d, isObj := doc.(map[string]any); isObj && len(list) == 0 {
		if pages, ok := d["results"].([]any); ok { // Confluence REST
			t.pages(pages)
		} else if _, ok := d["body"]; ok || d["type"] == "page" || d["type"] == "blogpost" {
			t.pages([]any{d})
		}
		return
	}
	for _, x := range list {
		obj := x.(map[string]any)
		key := obj["key"].(string)
		fields := obj["fields"].(map[string]any)
		t.item(Jira, key)
		summary, _ := fields["summary"].(string)
		text := []string{summary, plainText(fields["description"])}
		if c, ok := fields["comment"].(map[string]any); ok {
			cs, _ := c["comments"].([]any)
			for _, cm := range cs {
				if m, ok := cm.(map[string]any); ok {
					text = append(text, plainText(m["body"]))
				}
			}
		}
		t.issues[strings.ToUpper(key)] = &issue{Key: key, Summary: summary, Text: strings.Join(text, "\n")}
		ls, _ := fields["issuelinks"].([]any)
		for _, l := range ls {
			lm, _ := l.(map[string]any)
			typ, _ := lm["type"].(map[string]any)
			typeName, _ := typ["name"].(string)
			var lk link
			if o, ok := lm["outwardIssue"].(map[string]any); ok {
				other, _ := o["key"].(string)
				lk = link{From: key, To: other, Type: typeName}
			} else if in, ok := lm["inwardIssue"].(map[string]any); ok {
				other, _ := in["key"].(string)
				lk = link{From: other, To: key, Type: typeName}
			}
			if lk.From == "" || lk.To == "" {
				continue
			}
			if slices.ContainsFunc(t.Strip, func(s string) bool { return strings.EqualFold(s, typeName) }) {
				t.dups[pair{Duplicate: strings.ToUpper(lk.From), Original: strings.ToUpper(lk.To)}] = true
				continue
			}
			t.links[link{From: strings.ToUpper(lk.From), To: strings.ToUpper(lk.To), Type: typeName}] = true
		}
	}
}

// pages counts the Confluence pages of a REST payload by their IDs.
func (t *Truth) pages(list []any) {
	for _, x := range list {
		if p, ok := x.(map[string]any); ok {
			if id, ok := p["id"].(string); ok && id != "" {
				t.item(Confluence, id)
			}
		}
	}
}

// plainText is the text of a description or comment: a string (REST v2) or
// the text nodes of an Atlassian Document Format tree (REST v3).
func plainText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		var parts []string
		if s, ok := x["text"].(string); ok {
			parts = append(parts, s)
		}
		if cs, ok := x["content"].([]any); ok {
			for _, c := range cs {
				parts = append(parts, plainText(c))
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

var msgID = regexp.MustCompile(`<([^<>\s]+)>`)

// message records one message's identity and threading headers.
func (t *Truth) message(raw []byte) {
	h := headers(raw)
	m := &message{ID: firstID(h["message-id"])}
	m.InReplyTo = firstID(h["in-reply-to"])
	for _, x := range msgID.FindAllStringSubmatch(h["references"], -1) {
		m.References = append(m.References, x[1])
	}
	t.item(Email, m.ID)
	if m.ID != "" && t.messages[m.ID] == nil {
		t.messages[m.ID] = m
	}
}

func firstID(v string) string {
	if m := msgID.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return strings.TrimSpace(v)
}

// headers reads a message's header block (unfolding continuation lines),
// keyed by lower-case name; the first of a repeated field wins.
func headers(raw []byte) map[string]string {
	h := map[string]string{}
	var name string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if first && strings.HasPrefix(line, "From ") {
			first = false
			continue // an mbox separator saved with the message
		}
		first = false
		if line == "" {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && name != "" {
			h[name] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			name = ""
			continue
		}
		name = strings.ToLower(strings.TrimSpace(k))
		if _, seen := h[name]; seen {
			name = "" // the first of a repeated field wins
			continue
		}
		h[name] = strings.TrimSpace(v)
	}
	return h
}

// eachMessage reads a mailbox as a stream and calls fn with each message's
// header block (the lines up to the first empty one), splitting at "From "
// lines that start the file or follow an empty line.
func eachMessage(r io.Reader, fn func(header []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var head bytes.Buffer
	inHeader, started, prevEmpty := false, false, true
	for {
		line, isPrefix, err := br.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if prevEmpty && !isPrefix && bytes.HasPrefix(line, []byte("From ")) {
			if started {
				fn(head.Bytes())
			}
			head.Reset()
			started, inHeader, prevEmpty = true, true, false
			continue
		}
		empty := len(bytes.TrimRight(line, "\r")) == 0 && !isPrefix
		if inHeader {
			if empty {
				inHeader = false
			} else if head.Len() < 1<<20 {
				head.Write(line)
				if !isPrefix {
					head.WriteByte('\n')
				}
			}
		}
		if !isPrefix {
			prevEmpty = empty
		}
	}
	if started {
		fn(head.Bytes())
	}
	return nil
}

// Repository records the commits of a Git repository (a directory) or
// bundle (a file, unbundled into scratch with unbundle) that are reachable
// from its branches, and the branches.
func (t *Truth) Repository(path string, unbundle func(bundle, dir string) error) error {
	var repo *gogit.Repository
	var err error
	if info, serr := os.Stat(path); serr == nil && !info.IsDir() {
		dir, derr := os.MkdirTemp("", "jervis-eval-bundle-")
		if derr != nil {
			return derr
		}
		defer os.RemoveAll(dir)
		if err := unbundle(path, dir); err != nil {
			return err
		}
		repo, err = gogit.PlainOpen(dir)
	} else {
		repo, err = gogit.PlainOpen(path)
	}
	if err != nil {
		return fmt.Errorf("eval: repository %s: %w", path, err)
	}
	refs, err := repo.References()
	if err != nil {
		return err
	}
	var heads []plumbing.Hash
	err = refs.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() && r.Type() == plumbing.HashReference {
			heads = append(heads, r.Hash())
			t.item(Git, "branch:"+r.Name().Short())
		}
		return nil
	})
	if err != nil {
		return err
	}
	seen := map[plumbing.Hash]bool{}
	for _, h := range heads {
		queue := []plumbing.Hash{h}
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			if seen[c] {
				continue
			}
			seen[c] = true
			commit, err := repo.CommitObject(c)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				continue // a shallow history
			}
			if err != nil {
				return err
			}
			t.recordCommit(commit)
			queue = append(queue, commit.ParentHashes...)
		}
	}
	return nil
}

func (t *Truth) recordCommit(c *object.Commit) {
	t.item(Git, c.Hash.String())
	t.commits[c.Hash.String()] = c.Message
}

// keyRE finds issue keys in commit messages, in any case.
var keyRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9]{1,9})-([0-9]{1,7})\b`)

// citations returns, per commit, the keys of the corpus's issues that its
// message cites (in any case: "timob-23941" in a merged branch's name).
func (t *Truth) citations() map[string][]string {
	projects := map[string]bool{}
	for k := range t.issues {
		p, _, _ := strings.Cut(k, "-")
		projects[p] = true
	}
	out := map[string][]string{}
	for hash, msg := range t.commits {
		for _, m := range keyRE.FindAllStringSubmatch(msg, -1) {
			key := strings.ToUpper(m[1]) + "-" + m[2]
			if projects[strings.ToUpper(m[1])] && t.issues[key] != nil && !slices.Contains(out[hash], key) {
				out[hash] = append(out[hash], key)
			}
		}
	}
	return out
}
