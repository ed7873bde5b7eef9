// Package jira turns Jira issues into source documents: from REST payloads
// (a single issue, a search response with "issues", or an array of issues,
// from Cloud's /rest/api/3 or Data Center's /rest/api/2) and, in a later
// step, from a polled Jira site.
//
// Kept: key, summary, description, status, type, priority, project,
// assignee and reporter, labels, fix versions, issue links with their type
// names and direction, comments (author, time, text), created and updated.
// Cloud's rich text (Atlassian Document Format) becomes plain text. An
// issue with missing or mistyped fields is returned with its raw JSON and
// the reason (store.MetaParseError), so it is quarantined, not lost.
package jira

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// ErrNotJira means a JSON document has no Jira issues in it.
var ErrNotJira = errors.New("not a Jira issue payload")

type user struct {
	DisplayName  string `json:"displayName"`
	EmailAddress string `json:"emailAddress"`
	Name         string `json:"name"`      // Data Center
	Key          string `json:"key"`       // Data Center
	AccountID    string `json:"accountId"` // Cloud
}

func (u *user) ref() string {
	if u == nil {
		return ""
	}
	switch {
	case u.EmailAddress != "":
		return strings.ToLower(u.EmailAddress)
	case u.Name != "":
		return u.Name
	}
	return u.AccountID
}

type named struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

type issueLink struct {
	Type struct {
		Name    string `json:"name"`
		Inward  string `json:"inward"`
		Outward string `json:"outward"`
	} `json:"type"`
	InwardIssue  *struct{ Key string } `json:"inwardIssue"`
	OutwardIssue *struct{ Key string } `json:"outwardIssue"`
}

type comment struct {
	Author  *user           `json:"author"`
	Body    json.RawMessage `json:"body"`
	Created string          `json:"created"`
}

type fields struct {
	Summary     string          `json:"summary"`
	Description json.RawMessage `json:"description"`
	Status      *named          `json:"status"`
	IssueType   *named          `json:"issuetype"`
	Priority    *named          `json:"priority"`
	Project     *named          `json:"project"`
	Assignee    *user           `json:"assignee"`
	Reporter    *user           `json:"reporter"`
	Labels      []string        `json:"labels"`
	FixVersions []named         `json:"fixVersions"`
	IssueLinks  []issueLink     `json:"issuelinks"`
	Comment     *struct {
		Comments []comment `json:"comments"`
	} `json:"comment"`
	Created string `json:"created"`
	Updated string `json:"updated"`
}

type issue struct {
	ID     string  `json:"id"`
	Key    string  `json:"key"`
	Self   string  `json:"self"`
	Fields *fields `json:"fields"`
}

// Meta is a Jira document's metadata (Normalized.Metadata), as Issue
// writes it and Shape reads it.
type Meta struct {
	Key         string    `json:"key"`
	Status      string    `json:"status,omitempty"`
	IssueType   string    `json:"issueType,omitempty"`
	Priority    string    `json:"priority,omitempty"`
	Project     string    `json:"project,omitempty"`
	Assignee    string    `json:"assignee,omitempty"`
	Reporter    string    `json:"reporter,omitempty"`
	Created     string    `json:"created,omitempty"`
	Updated     string    `json:"updated,omitempty"`
	Labels      []string  `json:"labels,omitempty"`
	FixVersions []string  `json:"fixVersions,omitempty"`
	IssueLinks  []Link    `json:"issueLinks,omitempty"`
	Comments    []Comment `json:"comments,omitempty"`
	// People are the user records the issue names (assignee, reporter,
	// commenters), each once: who its person refs are.
	People []User `json:"people,omitempty"`
}

// User is a Jira user record as kept in metadata.
type User struct {
	Ref         string `json:"ref"`               // what Assignee, Reporter and Comment.Author hold
	Account     string `json:"account,omitempty"` // Data Center's name (or key), Cloud's accountId
	DisplayName string `json:"displayName,omitempty"`
	Email       string `json:"email,omitempty"`
}

func (m *Meta) person(u *user) {
	if u == nil || u.ref() == "" {
		return
	}
	for _, p := range m.People {
		if p.Ref == u.ref() {
			return
		}
	}
	m.People = append(m.People, User{Ref: u.ref(), Account: cmp.Or(u.Name, u.Key, u.AccountID), DisplayName: u.DisplayName, Email: u.EmailAddress})
}

// Link is an issue link as kept in metadata.
type Link struct {
	Type      string `json:"type"`      // "Blocks", "Duplicate", "Relates"
	Direction string `json:"direction"` // "outward" (this issue blocks Key) or "inward"
	Phrase    string `json:"phrase"`    // "blocks", "is blocked by"
	Key       string `json:"key"`
}

// Comment is a comment as kept in metadata.
type Comment struct {
	Author  string `json:"author"`
	Created string `json:"created"`
	Text    string `json:"text"`
}

// Parse returns one document per issue in a REST payload. Items that are not
// valid issues come back as documents with a parse error.
func Parse(payload []byte) ([]store.Document, error) {
	payload = bytes.TrimSpace(payload)
	if len(payload) > 0 && payload[0] == '{' {
		// Most files hold one issue: decoded as one with a look for
		// "issues" beside it, the JSON is read once (parseItems's probe
		// then Issue read it twice, a third of the import's CPU on the
		// dev corpus). Anything else — a search result, a field of the
		// wrong type, neither key nor fields — is read by parseItems.
		var one struct {
			Issues json.RawMessage `json:"issues"`
			issue
		}
		if json.Unmarshal(payload, &one) == nil && one.Issues == nil && (one.Key != "" || one.Fields != nil) {
			d, err := issueDocument(payload, one.issue)
			if err != nil {
				d = unparsable(payload, fmt.Errorf("issue 1: %w", err))
			}
			return []store.Document{d}, nil
		}
	}
	return parseItems(payload)
}

// parseItems reads a payload (trimmed) as its items — an array of issues,
// a search result's issues or one issue — and each item as an issue.
func parseItems(payload []byte) ([]store.Document, error) {
	var items []json.RawMessage
	switch {
	case len(payload) > 0 && payload[0] == '[':
		if err := json.Unmarshal(payload, &items); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotJira, err)
		}
	case len(payload) > 0 && payload[0] == '{':
		var probe struct {
			Issues json.RawMessage `json:"issues"`
			Key    json.RawMessage `json:"key"`
			Fields json.RawMessage `json:"fields"`
		}
		if err := json.Unmarshal(payload, &probe); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotJira, err)
		}
		switch {
		case probe.Issues != nil:
			if err := json.Unmarshal(probe.Issues, &items); err != nil {
				return nil, fmt.Errorf("%w: issues: %v", ErrNotJira, err)
			}
		case probe.Key != nil || probe.Fields != nil:
			items = []json.RawMessage{payload}
		default:
			return nil, ErrNotJira
		}
	default:
		return nil, ErrNotJira
	}
	docs := make([]store.Document, 0, len(items))
	for i, raw := range items {
		d, err := Issue(raw)
		if err != nil {
			d = unparsable(raw, fmt.Errorf("issue %d: %w", i+1, err))
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Issue turns one issue's JSON into a document.
func Issue(raw json.RawMessage) (store.Document, error) {
	var is issue
	if err := json.Unmarshal(raw, &is); err != nil {
		return store.Document{}, err
	}
	return issueDocument(raw, is)
}

// issueDocument is Issue once raw is decoded as is.
func issueDocument(raw json.RawMessage, is issue) (store.Document, error) {
	switch {
	case is.Key == "":
		return store.Document{}, errors.New("missing key")
	case is.Fields == nil:
		return store.Document{}, fmt.Errorf("%s: missing fields", is.Key)
	case strings.TrimSpace(is.Fields.Summary) == "":
		return store.Document{}, fmt.Errorf("%s: missing summary", is.Key)
	}
	f := is.Fields
	desc := richText(f.Description)
	meta := Meta{Key: is.Key, Assignee: f.Assignee.ref(), Reporter: f.Reporter.ref(), Created: f.Created, Updated: f.Updated, Labels: f.Labels}
	meta.person(f.Assignee)
	meta.person(f.Reporter)
	if f.Status != nil {
		meta.Status = f.Status.Name
	}
	if f.IssueType != nil {
		meta.IssueType = f.IssueType.Name
	}
	if f.Priority != nil {
		meta.Priority = f.Priority.Name
	}
	if f.Project != nil {
		meta.Project = f.Project.Key
	}
	for _, v := range f.FixVersions {
		meta.FixVersions = append(meta.FixVersions, v.Name)
	}
	for _, l := range f.IssueLinks {
		switch {
		case l.OutwardIssue != nil:
			meta.IssueLinks = append(meta.IssueLinks, Link{Type: l.Type.Name, Direction: "outward", Phrase: l.Type.Outward, Key: l.OutwardIssue.Key})
		case l.InwardIssue != nil:
			meta.IssueLinks = append(meta.IssueLinks, Link{Type: l.Type.Name, Direction: "inward", Phrase: l.Type.Inward, Key: l.InwardIssue.Key})
		}
	}
	var body strings.Builder
	body.WriteString(desc)
	if f.Comment != nil {
		for _, c := range f.Comment.Comments {
			cm := Comment{Author: c.Author.ref(), Created: c.Created, Text: richText(c.Body)}
			meta.person(c.Author)
			meta.Comments = append(meta.Comments, cm)
			fmt.Fprintf(&body, "\n\nComment by %s (%s):\n%s", cm.Author, cm.Created, cm.Text)
		}
	}
	observed, _ := time.Parse("2006-01-02T15:04:05.000-0700", f.Updated)
	return store.Document{
		SourceType: store.SourceJira,
		ExternalID: is.Key,
		Raw:        raw,
		ObservedAt: observed,
		Normalized: store.Normalized{Title: is.Key + ": " + f.Summary, Body: strings.TrimSpace(body.String()), Metadata: pollers.MetaMap(meta)},
	}, nil
}

// richText returns the text of a description or comment body: a plain
// string (REST v2) or an Atlassian Document Format node (REST v3).
func richText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var node adf
	if json.Unmarshal(raw, &node) != nil {
		return ""
	}
	var b strings.Builder
	node.text(&b, 0)
	return strings.TrimSpace(b.String())
}

// adf is an Atlassian Document Format node.
type adf struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Attrs   json.RawMessage `json:"attrs"`
	Content []adf           `json:"content"`
}

func (n adf) text(b *strings.Builder, depth int) {
	if depth > 100 {
		return
	}
	switch n.Type {
	case "text":
		b.WriteString(n.Text)
	case "hardBreak":
		b.WriteString("\n")
	case "mention", "emoji", "inlineCard":
		var a struct{ Text, URL, ShortName string }
		json.Unmarshal(n.Attrs, &a)
		b.WriteString(a.Text + a.URL + a.ShortName)
	}
	for _, c := range n.Content {
		c.text(b, depth+1)
	}
	switch n.Type {
	case "paragraph", "heading", "listItem", "codeBlock", "blockquote", "rule":
		b.WriteString("\n")
	}
}

func unparsable(raw []byte, reason error) store.Document {
	var probe struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(raw, &probe)
	return store.Unparsable(store.SourceJira, probe.Key, probe.Key, raw, reason)
}
