// Package confluence turns Confluence pages into source documents: from
// REST content payloads (one page, or a search/list response with
// "results") and from storage-format XHTML exports, and, in a later step,
// from a polled Confluence site.
//
// Kept: id, title, space, version, author, ancestors (parent pages), the
// storage-format body converted to text (html-to-markdown), and the page's
// links: <a href> URLs and references to other pages (<ri:page>).
package confluence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// ErrNotConfluence means a payload has no Confluence pages in it.
var ErrNotConfluence = errors.New("not a Confluence page payload")

type page struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Title string `json:"title"`
	Space *struct {
		Key  string `json:"key"`
		Name string `json:"name"`
	} `json:"space"`
	Version *struct {
		Number int    `json:"number"`
		When   string `json:"when"`
		By     *struct {
			DisplayName string `json:"displayName"`
			Email       string `json:"email"`
			PublicName  string `json:"publicName"`
		} `json:"by"`
	} `json:"version"`
	Ancestors []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	} `json:"ancestors"`
	Body *struct {
		Storage *struct {
			Value string `json:"value"`
		} `json:"storage"`
	} `json:"body"`
	Links *struct {
		WebUI string `json:"webui"`
		Base  string `json:"base"`
	} `json:"_links"`
}

// Parse returns one document per page in a REST payload; items that are not
// valid pages come back with a parse error (store.MetaParseError).
func Parse(payload []byte) ([]store.Document, error) {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 || payload[0] != '{' {
		return nil, ErrNotConfluence
	}
	var probe struct {
		Results json.RawMessage `json:"results"`
		Type    string          `json:"type"`
		Body    json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotConfluence, err)
	}
	var items []json.RawMessage
	switch {
	case probe.Results != nil:
		if err := json.Unmarshal(probe.Results, &items); err != nil {
			return nil, fmt.Errorf("%w: results: %v", ErrNotConfluence, err)
		}
	case probe.Type == "page" || probe.Type == "blogpost" || probe.Body != nil:
		items = []json.RawMessage{payload}
	default:
		return nil, ErrNotConfluence
	}
	docs := make([]store.Document, 0, len(items))
	for i, raw := range items {
		d, err := Page(raw)
		if err != nil {
			d = unparsable(raw, fmt.Errorf("page %d: %w", i+1, err))
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Page turns one page's JSON into a document.
func Page(raw json.RawMessage) (store.Document, error) {
	var p page
	if err := json.Unmarshal(raw, &p); err != nil {
		return store.Document{}, err
	}
	switch {
	case p.ID == "":
		return store.Document{}, errors.New("missing id")
	case strings.TrimSpace(p.Title) == "":
		return store.Document{}, fmt.Errorf("page %s: missing title", p.ID)
	case p.Body == nil || p.Body.Storage == nil:
		return store.Document{}, fmt.Errorf("page %s: missing body.storage (expand=body.storage)", p.ID)
	}
	text, links, err := Storage(p.Body.Storage.Value)
	if err != nil {
		return store.Document{}, fmt.Errorf("page %s: %w", p.ID, err)
	}
	meta := Meta{PageID: p.ID, PageLinks: links.Pages}
	if p.Space != nil {
		meta.Space = p.Space.Key
	}
	var observed time.Time
	if v := p.Version; v != nil {
		meta.Version = v.Number
		if v.By != nil {
			meta.Author = strings.ToLower(v.By.Email)
			if v.By.Email == "" {
				meta.Author = v.By.DisplayName
			}
		}
		observed, _ = time.Parse(time.RFC3339, v.When)
	}
	for _, a := range p.Ancestors {
		meta.Ancestors = append(meta.Ancestors, a.Title)
	}
	if len(meta.Ancestors) > 0 {
		meta.Parent = meta.Ancestors[len(meta.Ancestors)-1]
	}
	var ls []store.Link
	for _, u := range links.URLs {
		ls = append(ls, store.Link{URL: u})
	}
	return store.Document{
		SourceType: store.SourceConfluence,
		ExternalID: p.ID,
		Raw:        raw,
		ObservedAt: observed,
		Normalized: store.Normalized{Title: p.Title, Body: text, Metadata: pollers.MetaMap(meta), Links: ls},
	}, nil
}

// Links are the links of a storage-format body.
type Links struct {
	URLs  []string // <a href="http...">
	Pages []string // <ri:page ri:content-title="...">
}

var (
	riPage = regexp.MustCompile(`<ri:page\b[^>]*\bri:content-title="([^"]*)"`)
	href   = regexp.MustCompile(`<a\b[^>]*\bhref="(https?://[^"]+)"`)
)

// Storage converts a storage-format (XHTML) body to text and its links.
// Confluence macros are dropped; their text content is kept.
func Storage(xhtml string) (string, Links, error) {
	var l Links
	for _, m := range riPage.FindAllStringSubmatch(xhtml, 1000) {
		l.Pages = append(l.Pages, m[1])
	}
	for _, m := range href.FindAllStringSubmatch(xhtml, 1000) {
		l.URLs = append(l.URLs, m[1])
	}
	if strings.Count(xhtml, "<") > 0 && !balanced(xhtml) {
		return "", l, errors.New("storage format is not well-formed XHTML (unclosed or mismatched tags)")
	}
	text, err := htmltomarkdown.ConvertString(xhtml)
	if err != nil {
		return "", l, fmt.Errorf("storage format: %w", err)
	}
	return strings.TrimSpace(text), l, nil
}

var tagRE = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9:_-]*)[^>]*?(/?)>`)

// balanced reports whether the XHTML's elements nest properly (storage
// format is XML: every element is closed).
func balanced(x string) bool {
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(x, -1) {
		closing, name, self := m[1] == "/", strings.ToLower(m[2]), m[3] == "/"
		switch {
		case self:
		case closing:
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return false
			}
			stack = stack[:len(stack)-1]
		default:
			switch name { // void elements HTML writers leave open
			case "br", "hr", "img", "col", "input", "meta", "link":
				continue
			}
			stack = append(stack, name)
		}
	}
	return len(stack) == 0
}

// StorageDocument turns a storage-format export file (title from the file
// name) into a document.
func StorageDocument(title string, xhtml []byte) store.Document {
	sum := sha256.Sum256([]byte(title))
	id := "export:" + hex.EncodeToString(sum[:8])
	text, links, err := Storage(string(xhtml))
	if err != nil {
		return store.Unparsable(store.SourceConfluence, id, title, xhtml, err)
	}
	var ls []store.Link
	for _, u := range links.URLs {
		ls = append(ls, store.Link{URL: u})
	}
	return store.Document{SourceType: store.SourceConfluence, ExternalID: id, Raw: xhtml,
		Normalized: store.Normalized{Title: title, Body: text, Metadata: pollers.MetaMap(Meta{PageLinks: links.Pages}), Links: ls}}
}

// Meta is a Confluence document's metadata (Normalized.Metadata), as Page
// and StorageDocument write it and Shape reads it.
type Meta struct {
	PageID    string   `json:"pageId,omitempty"`
	Space     string   `json:"space,omitempty"`
	Version   int      `json:"version,omitempty"`
	Author    string   `json:"author,omitempty"` // e-mail, lower-cased, or the display name
	Ancestors []string `json:"ancestors,omitempty"`
	Parent    string   `json:"parent,omitempty"`
	PageLinks []string `json:"pageLinks,omitempty"`
}

func unparsable(raw []byte, reason error) store.Document {
	var probe struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	_ = json.Unmarshal(raw, &probe)
	return store.Unparsable(store.SourceConfluence, probe.ID, probe.Title, raw, reason)
}
