package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

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

func (t *Truth) item(source, id string) {
	t.items[source]++
	if t.ids[source] == nil {
		t.ids[source] = map[string]bool{}
	}
	if t.ids[source][id] {
		t.repeats[source]++
	}
	t.ids[source][id] = true
}

// File records the labels of one file (named as the pipeline will see it)
// and returns its content as the pipeline is to get it: Jira JSON without
// the stripped link types, everything else unchanged.
func (t *Truth) File(name string, raw []byte) []byte {
	t.files++
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return t.jira(name, raw)
	case ".eml":
		t.message(raw)
	case ".mbox":
		for _, m := range splitMbox(raw) {
			t.message(m)
		}
	case ".xhtml", ".html", ".htm": // a Confluence storage export, named by its title
		title := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		sum := sha256.Sum256([]byte(title))
		t.item(Confluence, fmt.Sprintf("export:%x", sum[:8]))
	case ".md", ".markdown", ".txt":
		t.item(File, filepath.ToSlash(name))
	}
	return raw
}

// jira reads the issues of a REST payload (one issue, a search response,
// an array), records them, and strips the link types in Strip.
func (t *Truth) jira(name string, raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers round-trip unchanged
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.notes = append(t.notes, fmt.Sprintf("%s: not JSON (%v)", name, err))
		return raw
	}
	var list []any
	switch d := doc.(type) {
	case []any:
		list = d
	case map[string]any:
		if is, ok := d["issues"].([]any); ok {
			list = is
		} else if pages, ok := d["results"].([]any); ok { // Confluence REST
			t.pages(pages)
		} else if _, ok := d["body"]; ok || d["type"] == "page" || d["type"] == "blogpost" {
			t.pages([]any{d})
		} else {
			list = []any{d}
		}
	}
	stripped := false
	for _, x := range list {
		obj, _ := x.(map[string]any)
		key, _ := obj["key"].(string)
		fields, _ := obj["fields"].(map[string]any)
		if key == "" || fields == nil {
			continue
		}
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
		kept := ls[:0:0]
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
			if slices.ContainsFunc(t.Strip, func(s string) bool { return strings.EqualFold(s, typeName) }) {
				stripped = true
				if lk.From != "" && lk.To != "" {
					t.dups[pair{Duplicate: strings.ToUpper(lk.From), Original: strings.ToUpper(lk.To)}] = true
				}
				continue
			}
			kept = append(kept, l)
			if lk.From != "" && lk.To != "" {
				t.links[link{From: strings.ToUpper(lk.From), To: strings.ToUpper(lk.To), Type: typeName}] = true
			}
		}
		if len(kept) != len(ls) {
			fields["issuelinks"] = kept
		}
	}
	if !stripped {
		return raw
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return raw
	}
	return out
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
	id := m.ID
	if id == "" {
		sum := sha256.Sum256(raw)
		id = fmt.Sprintf("sha256:%x", sum[:12])
	}
	t.item(Email, id)
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

// splitMbox splits a mailbox at its "From " separator lines (a "From " line
// that starts the file or follows an empty line).
func splitMbox(raw []byte) [][]byte {
	var out [][]byte
	start := -1
	prevEmpty := true
	for i := 0; i < len(raw); {
		end := bytes.IndexByte(raw[i:], '\n')
		next := len(raw)
		if end >= 0 {
			next = i + end + 1
		}
		line := bytes.TrimRight(raw[i:next], "\r\n")
		if prevEmpty && bytes.HasPrefix(line, []byte("From ")) {
			if start >= 0 {
				out = append(out, raw[start:i])
			}
			start = next
		}
		prevEmpty = len(line) == 0
		i = next
	}
	if start >= 0 && start < len(raw) {
		out = append(out, raw[start:])
	}
	return out
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
