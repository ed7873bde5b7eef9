package confluence

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// Kind is Confluence: pages polled from a site (connections of type
// confluence) or read from REST JSON and storage-format exports (.xhtml,
// .html), and how a page becomes knowledge: its author, space, parent and
// the pages it links to.
type Kind struct{}

var (
	_ pollers.Connector  = Kind{}
	_ pollers.FileReader = Kind{}
)

// About implements pollers.Kind.
func (Kind) About() pollers.About {
	return pollers.About{Name: "confluence", SourceType: store.SourceConfluence, Noun: "Confluence page",
		Namespaces: []string{"page", "person", "space"}, Extensions: []string{".json", ".xhtml", ".html", ".htm"}, ConnectionType: "confluence"}
}

// ReadFile implements pollers.FileReader: REST JSON (a page or a search
// response), or a storage-format export named by the page's title.
func (Kind) ReadFile(f *pollers.File, emit func(store.Document) error) error {
	if f.Ext() != ".json" {
		title := strings.TrimSuffix(filepath.Base(f.Name), filepath.Ext(f.Name))
		return pollers.ReadWhole(f, emit, pollers.One(func(raw []byte) store.Document { return StorageDocument(title, raw) }), nil)
	}
	return pollers.ReadWhole(f, emit, Parse, ErrNotConfluence)
}

// Shape implements pollers.Kind.
func (Kind) Shape(d store.Document) pollers.Shape {
	var m Meta
	pollers.DecodeMeta(d, &m)
	main := "page:" + d.Normalized.Title
	var h pollers.Header
	h.Line("Page", d.Normalized.Title)
	if m.Author != "" {
		h.Rel(main, "authored_by", pollers.Person(m.Author), h.Line("Author", m.Author))
	}
	if m.Space != "" {
		h.Rel(main, "in_space", "space:"+m.Space, h.Line("Space", m.Space))
	}
	if m.Parent != "" {
		h.Rel(main, "child_of", "page:"+m.Parent, h.Line("Parent", m.Parent))
	}
	for _, l := range m.PageLinks {
		h.Rel(main, "links_to", "page:"+l, h.Line("Links to", l))
	}
	return pollers.Shape{Main: main, Props: map[string]any{"title": d.Normalized.Title}, Lines: h.Lines, Relations: h.Relations,
		Summary: fmt.Sprintf("Confluence page %q in space %s by %s.", d.Normalized.Title, m.Space, m.Author), From: m.Author,
		Identities: author(m.Author)}
}

// Settings are a confluence connection's section.
type Settings struct {
	URL       string   `yaml:"url"`
	Username  string   `yaml:"username"`
	TokenEnv  string   `yaml:"token_env"`
	TokenFile string   `yaml:"token_file"`
	Spaces    []string `yaml:"spaces"`
}

// Configure implements pollers.Connector.
func (Kind) Configure(s pollers.Settings) (pollers.Configured, error) {
	var c Settings
	if err := s.Decode("confluence", &c); err != nil {
		return nil, err
	}
	var errs []error
	if !strings.HasPrefix(c.URL, "http") {
		errs = append(errs, s.Invalid("confluence.url", "%q is not an http(s) URL", c.URL))
	}
	if err := s.OneSecret("confluence", "token_env", "token_file", c.TokenEnv, c.TokenFile); err != nil {
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
	return NewSource(Config{BaseURL: c.URL, Username: c.Username, Token: token, Spaces: c.Spaces})
}

// author is what a page says of its author: an address, or (when
// Confluence hid it) the display name its person ref is made of.
func author(a string) []store.IdentityFact {
	var who pollers.Who
	switch {
	case a == "":
	case strings.Contains(a, "@"):
		who.Address(a, "Author: "+a, true)
	default:
		who.Account(pollers.Person(a), "confluence", "", a, "", "Author: "+a)
	}
	return who.Facts
}
