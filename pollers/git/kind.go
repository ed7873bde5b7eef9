package git

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// Kind is Git: commits and branches polled from a repository (connections
// of type git; a remote, a local path or a bundle), and how a commit
// becomes knowledge: its author, parents, files, and the issues it fixes
// or mentions.
type Kind struct{}

var _ pollers.Connector = Kind{}

// About implements pollers.Kind.
func (Kind) About() pollers.About {
	return pollers.About{Name: "git", SourceType: store.SourceGit, Noun: "commit",
		Namespaces: []string{"commit", "branch", "file", "person", "jira"}, ConnectionType: "git"}
}

var fixesRE = regexp.MustCompile(`(?i)\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?)\s+([A-Z][A-Z0-9]{1,9}-[0-9]+)`)

// Shape implements pollers.Kind.
func (Kind) Shape(d store.Document) pollers.Shape {
	var h pollers.Header
	if strings.HasPrefix(d.ExternalID, "branch:") {
		var m BranchMeta
		pollers.DecodeMeta(d, &m)
		main := "branch:" + m.Branch
		h.Rel(main, "points_to", "commit:"+m.Head, h.Line("Head", m.Head))
		return pollers.Shape{Main: main, Props: map[string]any{"title": d.Normalized.Title}, Lines: h.Lines, Relations: h.Relations,
			Summary: fmt.Sprintf("Branch %s is at commit %s.", m.Branch, m.Head)}
	}
	var m CommitMeta
	pollers.DecodeMeta(d, &m)
	main := "commit:" + d.ExternalID
	h.Line("Commit", d.ExternalID)
	if m.Author != "" {
		h.Rel(main, "authored_by", pollers.Person(m.Author), h.Line("Author", m.Author))
	}
	for _, p := range m.Parents {
		h.Rel(main, "parent", "commit:"+p, h.Line("Parent", p))
	}
	var paths []store.IdentityFact
	for _, f := range m.Files {
		line := h.Line("File", f.Path)
		h.Rel(main, "modifies", "file:"+f.Path, line)
		paths = append(paths, store.IdentityFact{Ref: "file:" + f.Path, Kind: store.FactPath, Value: strings.ToLower(f.Path), Evidence: line})
	}
	fixed := map[string]bool{}
	for _, mm := range fixesRE.FindAllStringSubmatch(d.Normalized.Body, -1) {
		fixed[strings.ToUpper(mm[1])] = true
	}
	for _, k := range m.IssueKeys {
		edge := "mentions"
		if fixed[k] {
			edge = "fixes"
		}
		h.Rel(main, edge, "jira:"+k, h.Line("Issue", k))
	}
	facts := identities(m, d.Normalized.Body)
	facts = append(append(facts, paths...), store.IdentityFact{Ref: main, Kind: store.FactCommit, Value: strings.ToLower(d.ExternalID), Evidence: "Commit: " + d.ExternalID})
	for _, r := range commitRefRE.FindAllStringSubmatch(d.Normalized.Body, 20) {
		typ, hash := "reverts", strings.ToLower(r[2])
		if strings.HasPrefix(strings.ToLower(r[1]), "cherry") {
			typ = "cherry_picked_from"
		}
		line := strings.TrimSpace(r[0])
		h.Rel(main, typ, "commit:"+hash, h.Line("Refers to", line))
		if len(hash) < 40 {
			facts = append(facts, store.IdentityFact{Ref: "commit:" + hash, Kind: store.FactAbbreviation, Value: hash, Evidence: line})
		}
	}
	return pollers.Shape{Main: main, Props: map[string]any{"title": d.Normalized.Title}, Lines: h.Lines, Relations: h.Relations,
		Summary: fmt.Sprintf("Commit %q by %s.", d.Normalized.Title, m.Author), From: m.Author, Identities: facts}
}

// commitRefRE matches the lines Git writes when a commit reverts or is
// cherry-picked from another: the hash may be abbreviated (identity
// resolution joins it to the full one).
var commitRefRE = regexp.MustCompile(`(?im)^[ \t]*\(?(this reverts commit|cherry picked from commit)[ \t]+([0-9a-f]{7,40})\b.*$`)

// trailerRE matches the trailers that name a person: who else wrote a
// commit, who signed it off.
var trailerRE = regexp.MustCompile(`(?im)^\s*(co-authored-by|signed-off-by|reviewed-by|acked-by|tested-by):\s*(.+?<[^<>\s]+@[^<>\s]+>)\s*$`)

// identities is what a commit says about who its people are: its author
// and committer (name and address, written by themselves), and the people
// its trailers name (as written by the author).
func identities(m CommitMeta, message string) []store.IdentityFact {
	var who pollers.Who
	if m.Author != "" {
		who.Address(m.AuthorName+" <"+m.Author+">", "Author: "+m.AuthorName+" <"+m.Author+">", true)
	}
	if m.Committer != "" {
		who.Address(m.CommitterName+" <"+m.Committer+">", "Committer: "+m.CommitterName+" <"+m.Committer+">", true)
	}
	for _, t := range trailerRE.FindAllStringSubmatch(message, 20) {
		// Co-authored-by names the co-author as GitHub knows them; a
		// sign-off is usually written by the one it names.
		who.Address(t[2], strings.TrimSpace(t[0]), strings.EqualFold(t[1], "co-authored-by") || strings.EqualFold(t[1], "signed-off-by"))
	}
	return who.Facts
}

// Settings are a git connection's section. An HTTPS remote that needs a
// token reads it from token_env or token_file (with username, default
// "git"), so that no secret is written in the URL; a URL with userinfo
// still works, and its secret is never echoed.
type Settings struct {
	URL       string   `yaml:"url"`
	Branches  []string `yaml:"branches"` // default: all
	Username  string   `yaml:"username"`
	TokenEnv  string   `yaml:"token_env"`
	TokenFile string   `yaml:"token_file"`
}

// Configure implements pollers.Connector.
func (Kind) Configure(s pollers.Settings) (pollers.Configured, error) {
	var c Settings
	if err := s.Decode("git", &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.URL == "" {
		errs = append(errs, s.Invalid("git.url", "required"))
	}
	if c.TokenEnv != "" && c.TokenFile != "" {
		errs = append(errs, s.Invalid("git", "set at most one of token_env and token_file"))
	}
	return pollers.Configuration[Settings]{Section: c, Settings: s, Open: open}, errors.Join(errs...)
}

// open builds the source of a connection Configure accepted: the clone
// lives in <data>/git/<connection id>.
func open(c Settings, s pollers.Settings) (pollers.Source, error) {
	var token string
	if c.TokenEnv != "" || c.TokenFile != "" {
		var err error
		if token, err = s.Secret(c.TokenEnv, c.TokenFile); err != nil {
			return nil, err
		}
	}
	return New(Config{URL: c.URL, Dir: filepath.Join(s.DataDir, "git", s.ID), Branches: c.Branches, Username: c.Username, Token: token})
}
