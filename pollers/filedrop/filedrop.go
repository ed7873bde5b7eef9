// Package filedrop reads files: it is the note kind (Markdown and plain
// text), the watcher of a drop directory (connections of type filedrop),
// and Walk, which lists the files of a directory, a tar archive (.tar,
// .tar.gz, .tgz) or a gzipped file (x.mbox.gz). Which kind reads a file is
// the registry's to say (pollers.Registry.ParseFile); filedrop knows no
// other kind.
//
// A file that cannot be parsed — an empty one, one that cannot be read —
// still becomes a document (raw bytes kept, store.MetaParseError set) and
// is quarantined by the indexers with its reason; a file of a type no kind
// reads is skipped.
package filedrop

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// Kind is the note: a Markdown or plain-text file (its first "# " heading
// is its title), dropped in a watched directory (connections of type
// filedrop) or imported.
type Kind struct{}

var (
	_ pollers.Connector  = Kind{}
	_ pollers.FileReader = Kind{}
)

// About implements pollers.Kind.
func (Kind) About() pollers.About {
	return pollers.About{Name: "file", SourceType: store.SourceFile, Noun: "file",
		Namespaces: []string{"file"}, Extensions: []string{".md", ".markdown", ".txt"}, ConnectionType: "filedrop"}
}

// ReadFile implements pollers.FileReader.
func (Kind) ReadFile(f *pollers.File, emit func(store.Document) error) error {
	return pollers.ReadWhole(f, emit, pollers.One(func(raw []byte) store.Document { return text(f.Name, raw) }), nil)
}

// Meta is a note's metadata: where it was read from.
type Meta struct {
	Path string `json:"path"`
}

// Shape implements pollers.Kind: the file's node and nothing more; its
// text is information.
func (Kind) Shape(d store.Document) pollers.Shape {
	var h pollers.Header
	h.Line("File", d.ExternalID)
	return pollers.Shape{Main: "file:" + d.ExternalID, Props: map[string]any{"title": d.Normalized.Title}, Lines: h.Lines,
		Summary: fmt.Sprintf("File %s: %q.", d.ExternalID, d.Normalized.Title)}
}

func text(name string, raw []byte) store.Document {
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return pollers.UnparsableFile(name, raw, store.SourceFile, errors.New("not UTF-8 text"))
	}
	body := string(raw)
	title := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	for line := range strings.Lines(body) {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok {
			title = strings.TrimSpace(h)
			break
		}
	}
	return store.Document{SourceType: store.SourceFile, ExternalID: filepath.ToSlash(name), Raw: raw,
		Normalized: store.Normalized{Title: title, Body: body, Metadata: pollers.MetaMap(Meta{Path: filepath.ToSlash(name)})}}
}

// Settings are a filedrop connection's section.
type Settings struct {
	Path string `yaml:"path"`
}

// Configure implements pollers.Connector.
func (Kind) Configure(s pollers.Settings) (pollers.Configured, error) {
	var c Settings
	if err := s.Decode("filedrop", &c); err != nil {
		return nil, err
	}
	if c.Path == "" {
		return nil, s.Invalid("filedrop.path", "required")
	}
	return pollers.Configuration[Settings]{Section: c, Settings: s, Open: open}, nil
}

// open builds the source of a connection Configure accepted.
func open(c Settings, s pollers.Settings) (pollers.Source, error) { return New(c.Path, 0, s.Registry) }

// Source watches a directory (recursively) as a connection: each poll
// imports the files changed since the cursor, oldest first, each read by
// the kind the registry says.
type Source struct {
	dir   string
	batch int
	kinds *pollers.Registry
}

var _ pollers.Source = (*Source)(nil)

// New returns a source for dir, which must exist. batch caps the files per
// page (default 200).
func New(dir string, batch int, kinds *pollers.Registry) (*Source, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("filedrop: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("filedrop: %s is not a directory", dir)
	}
	if kinds == nil {
		return nil, errors.New("filedrop: no registry of kinds to read files with")
	}
	return &Source{dir: dir, batch: cmp.Or(batch, 200), kinds: kinds}, nil
}

// read parses one file of the directory; one that cannot be read (or
// breaks off) is kept, with the reason, to be quarantined — never retried
// forever.
func (s *Source) read(path string) []store.Document {
	var docs []store.Document
	f, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(path)))
	if err == nil {
		err = s.kinds.ParseFile(path, f, func(d store.Document) error { docs = append(docs, d); return nil })
		f.Close()
	}
	if err != nil {
		docs = append(docs, s.kinds.Unreadable(path, err))
	}
	return docs
}

// cursor is the (modification time, path) of the last file imported.
type cursor struct {
	ModNanos int64  `json:"t"`
	Path     string `json:"p"`
}

type file struct {
	cursor
	size int64
}

// Poll implements pollers.Source.
func (s *Source) Poll(ctx context.Context, cur string) (pollers.Batch, error) {
	var after cursor
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &after); err != nil {
			return pollers.Batch{}, fmt.Errorf("filedrop: cursor %q: %w", cur, err)
		}
	}
	var files []file
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, path)
		f := file{cursor{info.ModTime().UnixNano(), filepath.ToSlash(rel)}, info.Size()}
		if f.ModNanos > after.ModNanos || f.ModNanos == after.ModNanos && f.Path > after.Path {
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		return pollers.Batch{}, fmt.Errorf("filedrop: scan %s: %w", s.dir, err)
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(cmp.Compare(a.ModNanos, b.ModNanos), strings.Compare(a.Path, b.Path))
	})
	var batch pollers.Batch
	batch.Cursor = cur
	for i, f := range files {
		if i == s.batch {
			batch.More = true
			break
		}
		if s.kinds.Supported(f.Path) {
			batch.Documents = append(batch.Documents, s.read(f.Path)...)
		}
		c, _ := json.Marshal(f.cursor)
		batch.Cursor = string(c)
	}
	return batch, nil
}
