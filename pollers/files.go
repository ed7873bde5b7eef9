package pollers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
)

// ErrUnsupported means no kind of this build reads files of this type.
var ErrUnsupported = errors.New("unsupported file type")

// Supported reports whether a kind of the registry reads files named like
// name.
func (r *Registry) Supported(name string) bool { return len(r.Readers(name)) > 0 }

// ParseFile reads one file with the kinds that claim its extension, in
// registry order, emitting its documents as they are parsed (a mailbox
// message by message). What no kind can read is still a document, with
// the reason, to be quarantined: an empty file, one over MaxFileBytes (its
// first MaxFileBytes bytes kept), one every claiming kind declines ("JSON
// is neither Jira issues nor Confluence pages"). A read error ends it:
// what was emitted stays, and the error says how far it got. A type no
// kind claims is ErrUnsupported.
func (r *Registry) ParseFile(name string, content io.Reader, emit func(store.Document) error) error {
	readers := r.Readers(name)
	if len(readers) == 0 {
		return fmt.Errorf("%w: %s", ErrUnsupported, name)
	}
	f := openFile(name, content)
	defer f.close()
	st := r.fileSourceType(name)
	if head := f.Peek(4096); len(bytes.TrimSpace(head)) == 0 {
		if raw, err := f.Bytes(); err != nil {
			return err
		} else if len(bytes.TrimSpace(raw)) == 0 {
			return emit(UnparsableFile(name, raw, st, fmt.Errorf("empty file (%d bytes)", len(raw))))
		}
	}
	var declined error
	var nouns []string
	for _, fr := range readers {
		err := fr.ReadFile(f, emit)
		if !errors.Is(err, ErrNotMine) {
			return err
		}
		declined = err
		nouns = append(nouns, fr.About().Noun+"s")
	}
	raw, err := f.Bytes()
	if err != nil {
		return err
	}
	if len(raw) > MaxFileBytes {
		return emit(TooLarge(name, raw))
	}
	what := strings.ToUpper(strings.TrimPrefix(f.Ext(), "."))
	why := errors.Unwrap(declined)
	if why == nil {
		why = declined
	}
	reason := fmt.Errorf("%s is neither %s: %w", what, strings.Join(nouns, " nor "), why)
	if len(nouns) == 1 {
		reason = fmt.Errorf("%s holds no %s: %w", what, nouns[0], why)
	}
	return emit(UnparsableFile(name, raw, st, reason))
}

// ReadWhole is how most FileReaders read a file: whole (one over
// MaxFileBytes is kept cut, with the reason), then parsed into documents,
// each emitted; a parse error that is notMine (nil: none) declines the
// file, so the next kind that claims its extension tries it.
func ReadWhole(f *File, emit func(store.Document) error, parse func(raw []byte) ([]store.Document, error), notMine error) error {
	raw, err := f.Bytes()
	if err != nil {
		return err
	}
	if len(raw) > MaxFileBytes {
		return emit(TooLarge(f.Name, raw))
	}
	docs, err := parse(raw)
	if notMine != nil && errors.Is(err, notMine) {
		return Decline(err)
	}
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

// One is a parse function of ReadWhole for formats of one document a file.
func One(parse func(raw []byte) store.Document) func([]byte) ([]store.Document, error) {
	return func(raw []byte) ([]store.Document, error) { return []store.Document{parse(raw)}, nil }
}

// Parse reads one file's content (see ParseFile) into documents.
func (r *Registry) Parse(name string, raw []byte) ([]store.Document, error) {
	var docs []store.Document
	err := r.ParseFile(name, bytes.NewReader(raw), func(d store.Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

// Decline is how a FileReader says a file is not of its kind, with the
// reason it is not (kept for the message when no kind reads it).
func Decline(reason error) error { return declined{reason} }

type declined struct{ reason error }

func (d declined) Error() string        { return ErrNotMine.Error() + ": " + d.reason.Error() }
func (d declined) Is(target error) bool { return target == ErrNotMine }
func (d declined) Unwrap() error        { return d.reason }

// fileSourceType is what a file that cannot be read is stored as: the
// source type of the one kind that claims its extension, else FILE.
func (r *Registry) fileSourceType(name string) store.SourceType {
	if rs := r.Readers(name); len(rs) == 1 {
		return rs[0].About().SourceType
	}
	return store.SourceFile
}

// TooLarge is the document of a file over MaxFileBytes: its first
// MaxFileBytes bytes, and the reason (raw may be longer; it is cut).
func TooLarge(name string, raw []byte) store.Document {
	ext := strings.ToLower(filepath.Ext(name))
	return UnparsableFile(name, raw[:min(len(raw), MaxFileBytes)], store.SourceFile, fmt.Errorf("%s is larger than %d bytes; only the first %d bytes are kept",
		ext, MaxFileBytes, MaxFileBytes))
}

// UnparsableFile is the document of a file that cannot be parsed: named by
// the file (its path kept in the metadata), its bytes, and the reason,
// which makes the indexers quarantine it.
func UnparsableFile(name string, raw []byte, st store.SourceType, reason error) store.Document {
	d := store.Unparsable(st, filepath.ToSlash(name), filepath.Base(name), raw, reason)
	d.Normalized.Metadata["path"] = filepath.ToSlash(name)
	return d
}

// Unreadable is the document of a file that could not be read (a
// permission, an I/O error, a broken archive member): stored with the
// reason, to be quarantined, so that it is listed rather than lost.
func (r *Registry) Unreadable(name string, err error) store.Document {
	return UnparsableFile(name, nil, r.fileSourceType(name), fmt.Errorf("unreadable: %w", err))
}
