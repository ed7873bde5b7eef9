// Package filedrop imports files: .eml messages, mbox mailboxes, Jira REST
// JSON (one issue, a search response, or an array of issues), Confluence
// REST JSON or storage-format XHTML, and Markdown or plain text. Parse turns
// one file into documents; Walk lists the files of a directory, a tar
// archive (.tar, .tar.gz, .tgz) or a gzipped file (x.mbox.gz); Source
// watches a directory as a connection.
//
// A file that cannot be parsed — an empty one, one that cannot be read —
// still becomes a document (raw bytes kept, store.MetaParseError set) and
// is quarantined by the indexers with its reason; a file of a type filedrop
// does not know is skipped (ErrUnsupported).
package filedrop

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/confluence"
	"github.com/jervis-dev/jervis/pollers/email"
	"github.com/jervis-dev/jervis/pollers/jira"
)

// ErrUnsupported means filedrop does not import files of this type.
var ErrUnsupported = errors.New("unsupported file type")

// MaxFileBytes is the largest file read whole; bigger ones are quarantined.
const MaxFileBytes = email.MaxBytes

// Parse turns the file name (its extension picks the format; the name is
// the external ID of text files) with content raw into documents.
func Parse(name string, raw []byte) ([]store.Document, error) {
	ext := strings.ToLower(filepath.Ext(name))
	if !Supported(name) {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, name)
	}
	if ext == ".mbox" || ext == ".txt" && looksLikeMbox(raw) { // split, not capped as a whole
		var docs []store.Document
		err := mbox(name, bytes.NewReader(raw), func(d store.Document) error { docs = append(docs, d); return nil })
		return docs, err
	}
	if len(raw) > MaxFileBytes {
		return []store.Document{tooLarge(name, raw, ext)}, nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return []store.Document{unparsable(name, raw, sourceOf(ext), fmt.Errorf("empty file (%d bytes)", len(raw)))}, nil
	}
	switch ext {
	case ".eml":
		return []store.Document{message(raw)}, nil
	case ".md", ".markdown", ".txt":
		return []store.Document{text(name, raw)}, nil
	case ".json":
		docs, err := jira.Parse(raw)
		if errors.Is(err, jira.ErrNotJira) {
			docs, err = confluence.Parse(raw)
		}
		if err != nil {
			return []store.Document{unparsable(name, raw, store.SourceFile, fmt.Errorf("JSON is neither Jira issues nor Confluence pages: %w", err))}, nil
		}
		return docs, nil
	case ".xhtml", ".html", ".htm":
		title := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		return []store.Document{confluence.StorageDocument(title, raw)}, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupported, name)
}

// extensions are the file types Parse reads.
var extensions = []string{".eml", ".mbox", ".md", ".markdown", ".txt", ".json", ".xhtml", ".html", ".htm"}

// Supported reports whether Parse reads files named like name.
func Supported(name string) bool {
	return slices.Contains(extensions, strings.ToLower(filepath.Ext(name)))
}

// Unreadable is the document of a file that could not be read (a
// permission, an I/O error, a broken archive member): stored with the
// reason, to be quarantined, so that it is listed rather than lost.
func Unreadable(name string, err error) store.Document {
	return unparsable(name, nil, sourceOf(strings.ToLower(filepath.Ext(name))), fmt.Errorf("unreadable: %w", err))
}

// sourceOf is the source type a file of this extension most likely holds.
func sourceOf(ext string) store.SourceType {
	if ext == ".eml" || ext == ".mbox" {
		return store.SourceEmail
	}
	return store.SourceFile
}

func message(raw []byte) store.Document {
	m, err := email.Parse(raw)
	if err != nil {
		return email.Unparsable(raw, err)
	}
	return m.Document(raw)
}

// ParseFrom reads one file from r and emits its documents as they are
// parsed: a mailbox message by message (a mailbox of any size; each
// message up to email.MaxBytes), every other format read whole, up to
// MaxFileBytes (a bigger file is quarantined with its first MaxFileBytes
// bytes and the reason), and parsed as Parse does. A read error ends it:
// what was emitted stays, and the error says how far it got. An emit error
// ends it too.
func ParseFrom(name string, r io.Reader, emit func(store.Document) error) error {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".mbox":
		return mbox(name, r, emit)
	case ".txt": // a list archive (Mailman writes 2022-August.txt) is a mailbox
		br := bufio.NewReaderSize(r, 64<<10)
		if head, _ := br.Peek(4096); looksLikeMbox(head) {
			return mbox(name, br, emit)
		}
		r = br
	}
	raw, err := readAtMost(r)
	if err != nil {
		return err
	}
	docs, err := Parse(name, raw)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

var mboxStart = regexp.MustCompile(`^From \S+.*\r?\n[A-Za-z][A-Za-z0-9-]*:`)

// looksLikeMbox reports whether a file starts like a mailbox: a "From "
// separator line, then a header field.
func looksLikeMbox(head []byte) bool { return mboxStart.Match(head) }

// mbox splits a mailbox at "From " separator lines that start the file or
// follow a blank line (mboxrd: ">From " lines in bodies are unescaped),
// reading it line by line, so a mailbox of any size takes one message's
// memory. A file that does not start with a separator is not an mbox and
// is quarantined whole (its first MaxFileBytes bytes).
func mbox(name string, r io.Reader, emit func(store.Document) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if head, err := br.Peek(5); !bytes.Equal(head, []byte("From ")) {
		raw, rerr := readAtMost(br)
		if rerr != nil {
			return rerr
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			return emit(unparsable(name, raw, store.SourceEmail, fmt.Errorf("empty file (%d bytes)", len(raw))))
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(raw) > MaxFileBytes {
			return emit(tooLarge(name, raw, ".mbox"))
		}
		return emit(unparsable(name, raw, store.SourceEmail, errors.New(`mbox: the first line is not a "From " separator`)))
	}
	var cur bytes.Buffer
	started, messages := false, 0
	// flush emits the message read so far; the line break before a
	// separator belongs to the separator.
	flush := func(atSeparator bool) error {
		if !started {
			return nil
		}
		raw := cur.Bytes()
		if atSeparator {
			raw = bytes.TrimSuffix(raw, []byte("\n"))
		}
		messages++
		return emit(message(append([]byte(nil), raw...)))
	}
	lineStart, lineBlank, prevBlank := true, true, true
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 {
			whole := frag[len(frag)-1] == '\n'
			line := bytes.TrimSuffix(bytes.TrimSuffix(frag, []byte("\n")), []byte("\r"))
			if lineStart && prevBlank && whole && bytes.HasPrefix(line, []byte("From ")) {
				if ferr := flush(true); ferr != nil {
					return ferr
				}
				cur.Reset()
				started, prevBlank = true, false
				continue
			}
			if lineStart {
				if unq, ok := bytes.CutPrefix(line, []byte(">")); ok && bytes.HasPrefix(bytes.TrimLeft(unq, ">"), []byte("From ")) {
					line = unq
				}
			}
			if cur.Len() <= email.MaxBytes { // a bigger message is quarantined with its first bytes
				cur.Write(line)
				if whole {
					cur.WriteByte('\n')
				}
			}
			lineBlank = lineBlank && len(bytes.TrimSpace(line)) == 0
			if lineStart = whole; whole {
				prevBlank, lineBlank = lineBlank, true
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return flush(false)
		case errors.Is(err, bufio.ErrBufferFull):
			continue // a line longer than the buffer: its next fragment
		case err != nil:
			if ferr := flush(false); ferr != nil {
				return ferr
			}
			return fmt.Errorf("mbox read after %d messages: %w", messages, err)
		}
	}
}

func text(name string, raw []byte) store.Document {
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return unparsable(name, raw, store.SourceFile, errors.New("not UTF-8 text"))
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
		Normalized: store.Normalized{Title: title, Body: body, Metadata: map[string]any{"path": filepath.ToSlash(name)}}}
}

func tooLarge(name string, raw []byte, ext string) store.Document {
	return unparsable(name, raw[:MaxFileBytes], store.SourceFile, fmt.Errorf("%s is %d bytes, more than %d; only the first %d bytes are kept", ext, len(raw), MaxFileBytes, MaxFileBytes))
}

func unparsable(name string, raw []byte, st store.SourceType, reason error) store.Document {
	d := store.Unparsable(st, filepath.ToSlash(name), filepath.Base(name), raw, reason)
	d.Normalized.Metadata["path"] = filepath.ToSlash(name)
	return d
}

// Source watches a directory (recursively) as a connection: each poll
// imports the files changed since the cursor, oldest first.
type Source struct {
	dir   string
	batch int
}

var _ pollers.Source = (*Source)(nil)

// New returns a source for dir, which must exist. batch caps the files per
// page (default 200).
func New(dir string, batch int) (*Source, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("filedrop: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("filedrop: %s is not a directory", dir)
	}
	return &Source{dir: dir, batch: cmp.Or(batch, 200)}, nil
}

// read parses one file of the directory; one that cannot be read (or
// breaks off) is kept, with the reason, to be quarantined — never retried
// forever.
func (s *Source) read(path string) []store.Document {
	var docs []store.Document
	f, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(path)))
	if err == nil {
		err = ParseFrom(path, f, func(d store.Document) error { docs = append(docs, d); return nil })
		f.Close()
	}
	if err != nil {
		docs = append(docs, Unreadable(path, err))
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
		if Supported(f.Path) {
			batch.Documents = append(batch.Documents, s.read(f.Path)...)
		}
		c, _ := json.Marshal(f.cursor)
		batch.Cursor = string(c)
	}
	return batch, nil
}
