package jira

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers"
)

// Kind is Jira: issues polled from a site (connections of type jira) or
// read from REST JSON files, and how an issue becomes knowledge: its
// people, project, labels, versions, links of every type and commenters.
type Kind struct{}

var (
	_ pollers.Connector  = Kind{}
	_ pollers.FileReader = Kind{}
)

// About implements pollers.Kind.
func (Kind) About() pollers.About {
	return pollers.About{Name: "jira", SourceType: store.SourceJira, Noun: "Jira issue",
		Namespaces: []string{"jira", "person", "project", "label", "version"}, Extensions: []string{".json"}, ConnectionType: "jira",
		Duplicates: true}
}

// ReadFile implements pollers.FileReader: a REST payload (an issue, a
// search response, an array of issues); JSON with no issue in it is not
// Jira's.
func (Kind) ReadFile(f *pollers.File, emit func(store.Document) error) error {
	return pollers.ReadWhole(f, emit, Parse, ErrNotJira)
}

// Shape implements pollers.Kind.
func (Kind) Shape(d store.Document) pollers.Shape {
	var m Meta
	pollers.DecodeMeta(d, &m)
	main := "jira:" + d.ExternalID
	var h pollers.Header
	h.Line("Issue", d.Normalized.Title)
	if m.Assignee != "" {
		h.Rel(main, "assigned_to", pollers.Person(m.Assignee), h.Line("Assignee", m.Assignee))
	}
	if m.Reporter != "" {
		h.Rel(main, "reported_by", pollers.Person(m.Reporter), h.Line("Reporter", m.Reporter))
	}
	if m.Project != "" {
		h.Rel(main, "in_project", "project:"+m.Project, h.Line("Project", m.Project))
	}
	for _, l := range m.Labels {
		h.Rel(main, "labeled", "label:"+l, h.Line("Label", l))
	}
	for _, v := range m.FixVersions {
		h.Rel(main, "fix_version", "version:"+v, h.Line("Fix version", v))
	}
	for _, l := range m.IssueLinks {
		ev := h.Line("Link", l.Phrase+" "+l.Key)
		typ, err := kb.EdgeType(l.Type) // "Gantt: start-finish" → gantt_start_finish
		if err != nil {
			typ = l.Type // kb.Ingest leaves it out, with a warning
		}
		if l.Direction == "inward" {
			h.Rel("jira:"+l.Key, typ, main, ev)
		} else {
			h.Rel(main, typ, "jira:"+l.Key, ev)
		}
	}
	var commenters []string
	for _, c := range m.Comments {
		commenters = append(commenters, c.Author)
	}
	slices.Sort(commenters)
	for _, c := range slices.Compact(commenters) {
		if c != "" {
			h.Rel(pollers.Person(c), "commented_on", main, h.Line("Comment by", c))
		}
	}
	var who pollers.Who
	for _, u := range m.People {
		who.Account(pollers.Person(u.Ref), "jira", u.Account, u.DisplayName, u.Email,
			fmt.Sprintf("Jira user %s: %s", cmp.Or(u.Account, u.Ref), cmp.Or(strings.TrimSpace(u.DisplayName+" "+angle(u.Email)), u.Ref)))
	}
	var status any
	if m.Status != "" {
		status = m.Status
	}
	s := pollers.Shape{
		Main: main, Props: map[string]any{"title": d.Normalized.Title, "status": status, "key": m.Key}, Lines: h.Lines, Relations: h.Relations,
		Summary: fmt.Sprintf("Jira issue %s (%s), assigned to %s, reported by %s.", d.Normalized.Title, m.Status, or(m.Assignee, "nobody"), or(m.Reporter, "unknown")),
		From:    m.Reporter, Conversational: true, Identities: who.Facts,
	}
	if m.Assignee != "" {
		s.To = []string{m.Assignee}
		if st := strings.ToLower(m.Status); st != "done" && st != "closed" {
			s.Assigned = fmt.Sprintf("open issue (%s) assigned to %s", m.Status, m.Assignee)
		}
	}
	return s
}

// angle is "<address>", or "" for no address.
func angle(addr string) string {
	if addr == "" {
		return ""
	}
	return "<" + addr + ">"
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// Settings are a jira connection's section.
type Settings struct {
	URL        string `yaml:"url"`
	Deployment string `yaml:"deployment"` // cloud or datacenter
	Username   string `yaml:"username"`   // Cloud: account e-mail; empty with a personal access token
	TokenEnv   string `yaml:"token_env"`
	TokenFile  string `yaml:"token_file"`
	JQL        string `yaml:"jql"` // extra filter, e.g. "project in (OPS, WEB)"
}

// Configure implements pollers.Connector.
func (Kind) Configure(s pollers.Settings) (pollers.Configured, error) {
	var c Settings
	if err := s.Decode("jira", &c); err != nil {
		return nil, err
	}
	var errs []error
	if !strings.HasPrefix(c.URL, "http") {
		errs = append(errs, s.Invalid("jira.url", "%q is not an http(s) URL", c.URL))
	}
	if d := c.Deployment; d != "" && d != Cloud && d != DataCenter {
		errs = append(errs, s.Invalid("jira.deployment", "%q is not cloud or datacenter", d))
	}
	if err := s.OneSecret("jira", "token_env", "token_file", c.TokenEnv, c.TokenFile); err != nil {
		errs = append(errs, err)
	}
	return pollers.Configuration[Settings]{Section: c, Settings: s, Open: open}, errors.Join(errs...)
}

// open builds the source of a connection Configure accepted.
func open(c Settings, s pollers.Settings) (pollers.Source, error) {
	token, err := s.Secret(c.TokenEnv, c.TokenFile)
	if err != nil {
		return nil, err
	}
	return NewSource(Config{BaseURL: c.URL, Deployment: c.Deployment, Username: c.Username, Token: token, JQL: c.JQL})
}
