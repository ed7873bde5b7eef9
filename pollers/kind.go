package pollers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

// Kind is one kind of source — email, Jira, Confluence, Git, a note — and
// everything that kind means: what it is (About), and how one of its
// documents becomes knowledge (Shape). A kind that polls a remote is also a
// Connector; one that reads files is also a FileReader. Each kind is one
// package under pollers/ and one line in the list cmd/jervis builds its
// Registry from (the model: Prometheus's service discovery, where each
// mechanism's config builds its own discoverer).
type Kind interface {
	// About says what the kind is.
	About() About
	// Shape says how a document of the kind becomes knowledge: its node,
	// its metadata edges with their evidence lines, and what the rules
	// route it by. It reads only the kind's own metadata (its typed Meta).
	Shape(d store.Document) Shape
}

// About is what a kind is.
type About struct {
	// Name names the kind ("email").
	Name string
	// SourceType is what its documents are stored as ("EMAIL").
	SourceType store.SourceType
	// Noun names one of its documents in prose ("email", "Jira issue").
	Noun string
	// Namespaces are the node types its Shape produces (prose mentions of
	// them become nodes too).
	Namespaces []string
	// Extensions are the file name endings a FileReader reads (".eml").
	Extensions []string
	// ConnectionType is the "type" of a Connector's connections ("imap"),
	// configured by its section of that name ("imap: {...}").
	ConnectionType string
	// Duplicates says its items can duplicate one another (an issue
	// reported twice): the qualifier may join like ones by a
	// possible_duplicate edge.
	Duplicates bool
	// LinkSources says its Shapes may carry HTML or a Sender (mail): the
	// indexer reads links from the one and gives a link's task the other.
	// It makes a document's Shape for them only where this is set: a
	// Shape decodes the document's metadata (a JSON round trip).
	LinkSources bool
}

// Connector is a kind that polls a remote: a connection of its
// ConnectionType is configured by its own section and polled through the
// Source it builds.
type Connector interface {
	Kind
	// Configure decodes and validates a connection's settings — errors name
	// the key ("connections[0].imap.addr: required"); it reads no secret
	// and touches no network.
	Configure(s Settings) (Configured, error)
}

// Configured is a connection its kind has validated.
type Configured interface {
	// NewSource reads the connection's secrets and builds its Source; it
	// touches no network.
	NewSource() (Source, error)
}

// Configuration is the Configured of most kinds: the section it decoded,
// the settings it came with, and how it opens its source.
type Configuration[T any] struct {
	Section  T
	Settings Settings
	Open     func(section T, s Settings) (Source, error)
}

// NewSource implements Configured.
func (c Configuration[T]) NewSource() (Source, error) { return c.Open(c.Section, c.Settings) }

// FileReader is a kind that reads files: those named with its Extensions.
// Several kinds may claim one extension (.json: Jira, then Confluence);
// each declines a file that is not its own with ErrNotMine, before it
// streams it.
type FileReader interface {
	Kind
	// ReadFile reads one file, emitting its documents as they are parsed (a
	// mailbox message by message). A file it cannot parse is emitted as an
	// unparsable document with the reason (store.Unparsable).
	ReadFile(f *File, emit func(store.Document) error) error
}

// ErrNotMine is what a FileReader returns for a file that is not of its
// kind (a .json that holds no Jira issues); the next reader is tried.
var ErrNotMine = errors.New("not of this kind")

// Shape is how a document becomes knowledge, and what the qualifier's rules
// route and summarise it by.
type Shape struct {
	// Main is the ref of the document's own node (jira:OPS-12).
	Main string
	// Props are the main node's properties (its title always).
	Props map[string]any
	// Lines are the header lines the indexed content starts with
	// ("From: Ann <ann@acme.test>"): the evidence of Relations.
	Lines []string
	// Relations are the metadata edges, each with its evidence line.
	Relations []kb.MetaRelation

	// Summary is one sentence on what the document is ("Email "Deploy"
	// from Ann to Bob on 2026-03-03T08:13:58Z.").
	Summary string
	// From is who writes or asks (a sender, a reporter, an author).
	From string
	// Sender is the sender's bare address, when the document has one.
	Sender string
	// To and Cc are whom it is addressed to (an email's To, an issue's
	// assignee) and copied to.
	To, Cc []string
	// Assigned, when set, is why the document needs To whatever its text
	// says ("open issue (In Progress) assigned to ann").
	Assigned string
	// Conversational: its own text may ask its readers something (mail,
	// issues); the text of other kinds is information.
	Conversational bool
	// HTML is markup the document was written in (links are read from it).
	HTML string
	// Identities are what the document says about who its people are
	// (Ref, Kind, Value, Evidence; the qualifier adds Source and Seen).
	Identities []store.IdentityFact
}

// Who collects what a document says about who its people are.
type Who struct {
	Facts []store.IdentityFact
}

// Address records a "Name <address>" as written in a field: the address
// always; the name as the person's own (self: an author, a sender) or as
// what someone else called them (a recipient). It returns the ref.
func (w *Who) Address(s, evidence string, self bool) string {
	name, addr := SplitAddress(s)
	if addr == "" {
		return ""
	}
	ref := Person(addr)
	w.Facts = append(w.Facts, store.IdentityFact{Ref: ref, Kind: store.FactEmail, Value: addr, Evidence: evidence})
	if n := kb.NormalizeName(name); n != "" && n != kb.NormalizeName(addr) {
		kind := store.FactNamed
		if self {
			kind = store.FactName
		}
		w.Facts = append(w.Facts, store.IdentityFact{Ref: ref, Kind: kind, Value: n, Evidence: evidence})
	}
	return ref
}

// Account records a source's user record: ref is the person ref the
// document's relations use for it, system the source ("jira"), and each
// of account, display name and address is recorded when known.
func (w *Who) Account(ref, system, account, displayName, email, evidence string) {
	if account != "" {
		w.Facts = append(w.Facts, store.IdentityFact{Ref: ref, Kind: store.FactAccount, Value: system + ":" + strings.ToLower(account), Evidence: evidence})
	}
	if email = strings.ToLower(strings.TrimSpace(email)); strings.Contains(email, "@") {
		w.Facts = append(w.Facts, store.IdentityFact{Ref: ref, Kind: store.FactEmail, Value: email, Evidence: evidence})
	}
	if n := kb.NormalizeName(displayName); n != "" {
		w.Facts = append(w.Facts, store.IdentityFact{Ref: ref, Kind: store.FactName, Value: n, Evidence: evidence})
	}
}

// SplitAddress splits "Name <address>" (or a bare address) into the name
// and the lower-cased address; no "@": no address.
func SplitAddress(s string) (name, addr string) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "<"); i >= 0 && strings.HasSuffix(s, ">") {
		name, addr = strings.Trim(strings.TrimSpace(s[:i]), `"'`), s[i+1:len(s)-1]
	} else {
		addr = s
	}
	addr = strings.ToLower(strings.TrimSpace(addr))
	if !strings.Contains(addr, "@") || strings.ContainsAny(addr, " <>") {
		return name, ""
	}
	return name, addr
}

// Header collects a Shape's evidence lines and the relations they support.
type Header struct {
	Lines     []string
	Relations []kb.MetaRelation
}

// Line adds "key: value" and returns it (the evidence of a relation).
func (h *Header) Line(key, value string) string {
	l := key + ": " + value
	h.Lines = append(h.Lines, l)
	return l
}

// Rel adds a metadata relation with its evidence line; a relation to
// nothing ("", "person:") is left out.
func (h *Header) Rel(from, typ, to, evidence string) {
	if strings.TrimSpace(to) == "" || strings.HasSuffix(to, ":") {
		return
	}
	h.Relations = append(h.Relations, kb.MetaRelation{From: from, Type: typ, To: to, Evidence: evidence})
}

// Person returns the ref of a person named by e-mail or user name ("Ann
// <ann@acme.test>" → person:ann@acme.test).
func Person(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "<"); i >= 0 && strings.HasSuffix(s, ">") {
		s = s[i+1 : len(s)-1]
	}
	return "person:" + strings.ToLower(s)
}

// MetaMap turns a kind's typed metadata (a struct, or a pointer to one)
// into the object documents keep (Normalized.Metadata), keyed by the
// fields' JSON names and holding their values as they are ([]Link stays
// []Link until the document is stored, as JSON); a field tagged omitempty
// is left out when it is empty. DecodeMeta reads it back. The keys are
// owned by the kind that writes and reads them.
func MetaMap(meta any) map[string]any {
	out := map[string]any{}
	v := reflect.Indirect(reflect.ValueOf(meta))
	if v.Kind() != reflect.Struct {
		return out
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if isEmpty(v.Field(i)) && slices.Contains(strings.Split(opts, ","), "omitempty") {
			continue
		}
		out[name] = v.Field(i).Interface()
	}
	return out
}

// isEmpty is encoding/json's omitempty: false, 0, nil, and a string,
// slice or map of length 0.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	}
	return v.IsZero()
}

// DecodeMeta reads a document's metadata into its kind's typed Meta; a
// field of the wrong type is left at its zero value (the rest is read).
func DecodeMeta(d store.Document, meta any) {
	b, err := json.Marshal(d.Normalized.Metadata)
	if err != nil {
		return
	}
	if json.Unmarshal(b, meta) == nil {
		return
	}
	// A field of the wrong type: read the fields one by one.
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return
	}
	for k, v := range fields {
		one, _ := json.Marshal(map[string]json.RawMessage{k: v})
		_ = json.Unmarshal(one, meta)
	}
}

// File is one file being read: its name, and its content to peek at, to
// read whole (once, up to MaxFileBytes+1 bytes, kept for the next reader
// when one declines) or to stream.
type File struct {
	Name  string
	br    *bufio.Reader
	whole []byte
	err   error
	read  bool
}

// MaxFileBytes is the largest file read whole; a bigger one is stored with
// its first MaxFileBytes bytes and the reason. (A mailbox is streamed, not
// read whole.)
const MaxFileBytes = 64 << 20

// fileBuffer is the size of a File's read buffer.
const fileBuffer = 64 << 10

// fileReaders are File read buffers to use again: an import of the dev Jira
// corpus made a new 64 KiB buffer for each of its 5,128 files (328 MB,
// the largest single source of the import's garbage).
var fileReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, fileBuffer) }}

// openFile wraps a file's content, read through a buffer from
// fileReaders; close gives it back. Nothing may read the File (or its
// Stream) after close.
func openFile(name string, r io.Reader) *File {
	br := fileReaders.Get().(*bufio.Reader)
	br.Reset(r)
	return &File{Name: name, br: br}
}

// close gives the read buffer of a File from openFile back.
func (f *File) close() {
	f.br.Reset(nil)
	fileReaders.Put(f.br)
	f.br = nil
}

// Ext is the file name's extension, lower-cased (".eml").
func (f *File) Ext() string { return strings.ToLower(filepath.Ext(f.Name)) }

// Peek returns up to n bytes of the start of the content without reading
// it.
func (f *File) Peek(n int) []byte {
	if f.read {
		return f.whole[:min(n, len(f.whole))]
	}
	b, _ := f.br.Peek(n)
	return b
}

// Bytes reads the content whole, up to MaxFileBytes+1 bytes (enough to see
// it is too large); later calls return the same bytes.
func (f *File) Bytes() ([]byte, error) {
	if !f.read {
		// What Peek buffered, and room to see the end: a file that fits
		// the buffer is read into one allocation.
		b := bytes.NewBuffer(make([]byte, 0, f.br.Buffered()+bytes.MinRead))
		_, f.err = io.Copy(b, io.LimitReader(f.br, MaxFileBytes+1))
		f.whole, f.read = b.Bytes(), true
	}
	return f.whole, f.err
}

// Stream returns the content as a stream; once it is read, no other reader
// can have the file.
func (f *File) Stream() io.Reader {
	if f.read {
		return bytes.NewReader(f.whole)
	}
	return f.br
}

// Settings are one connection's, as its Connector reads them.
type Settings struct {
	ID, Client string
	// Key is where the connection is in the configuration
	// ("connections[2]"), for messages.
	Key string
	// Section is the connection's section of its type ("imap: {...}"), nil
	// when there is none.
	Section *yaml.Node
	// Environ resolves secrets (os.Environ form).
	Environ []string
	// DataDir is where a source may keep state (a Git clone).
	DataDir string
	// Registry reads the files a source finds (a watched directory).
	Registry *Registry
}

// Decode reads the section into v (a struct with yaml tags) strictly: an
// unknown key or a value of the wrong type is an error naming the key.
func (s Settings) Decode(section string, v any) error {
	if s.Section == nil {
		return nil
	}
	return config.DecodeNode(s.Section, v, s.Key+"."+section)
}

// Secret reads a secret named by an environment variable or a file.
func (s Settings) Secret(env, file string) (string, error) {
	return config.Secret(env, file, s.Environ)
}

// OneSecret checks that exactly one of a secret's two keys is set
// (password_env or password_file): the error names the section.
func (s Settings) OneSecret(section, envKey, fileKey, env, file string) error {
	if (env == "") == (file == "") {
		return s.Invalid(section, "set exactly one of %s and %s", envKey, fileKey)
	}
	return nil
}

// Invalid is a settings error naming the key.
func (s Settings) Invalid(key, format string, args ...any) error {
	return fmt.Errorf("config: %s.%s: %s", s.Key, key, fmt.Sprintf(format, args...))
}

// Registry is the kinds this build knows, listed once (cmd/jervis builds
// it; no init() registers anything).
type Registry struct {
	kinds []Kind
}

// NewRegistry lists kinds; names, source types and connection types must
// be unique.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	seen := map[string]bool{}
	for _, k := range kinds {
		a := k.About()
		if !a.SourceType.Valid() {
			return nil, fmt.Errorf("pollers: kind %s: source type %q is not upper-case letters, digits and _", a.Name, a.SourceType)
		}
		keys := []string{"name " + a.Name, "source type " + string(a.SourceType)}
		if _, ok := k.(Connector); ok {
			keys = append(keys, "connection type "+a.ConnectionType)
		}
		for _, key := range keys {
			if seen[key] {
				return nil, fmt.Errorf("pollers: two kinds have %s", key)
			}
			seen[key] = true
		}
	}
	return &Registry{kinds: kinds}, nil
}

// Kinds returns the kinds, in registry order.
func (r *Registry) Kinds() []Kind { return slices.Clone(r.kinds) }

// Kind returns the kind of a source type; a source type no kind has (a
// kind removed from the build) gets a generic one that keeps the document
// as a note.
func (r *Registry) Kind(t store.SourceType) Kind {
	for _, k := range r.kinds {
		if k.About().SourceType == t {
			return k
		}
	}
	return generic{t}
}

// SourceTypes lists the kinds' source types, in registry order.
func (r *Registry) SourceTypes() []store.SourceType {
	out := make([]store.SourceType, len(r.kinds))
	for i, k := range r.kinds {
		out[i] = k.About().SourceType
	}
	return out
}

// Shape is the Shape of d by its kind.
func (r *Registry) Shape(d store.Document) Shape { return r.Kind(d.SourceType).Shape(d) }

// Connector returns the kind whose connections have this type.
func (r *Registry) Connector(connectionType string) (Connector, bool) {
	for _, k := range r.kinds {
		if c, ok := k.(Connector); ok && c.About().ConnectionType == connectionType {
			return c, true
		}
	}
	return nil, false
}

// ConnectionTypes lists the connection types, in registry order.
func (r *Registry) ConnectionTypes() []string {
	var out []string
	for _, k := range r.kinds {
		if c, ok := k.(Connector); ok {
			out = append(out, c.About().ConnectionType)
		}
	}
	return out
}

// Namespaces are the node types the kinds produce, and link (the
// qualifier's link nodes).
func (r *Registry) Namespaces() []string {
	out := []string{"link"}
	for _, k := range r.kinds {
		out = append(out, k.About().Namespaces...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Extensions lists the file name endings the kinds read.
func (r *Registry) Extensions() []string {
	var out []string
	for _, k := range r.kinds {
		if fr, ok := k.(FileReader); ok {
			out = append(out, fr.About().Extensions...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Readers returns the kinds that read files named like name, in registry
// order (none: the type is unsupported).
func (r *Registry) Readers(name string) []FileReader {
	ext := strings.ToLower(filepath.Ext(name))
	var out []FileReader
	for _, k := range r.kinds {
		if fr, ok := k.(FileReader); ok && slices.Contains(fr.About().Extensions, ext) {
			out = append(out, fr)
		}
	}
	return out
}

// generic is the kind of a source type no kind of this build has.
type generic struct{ t store.SourceType }

func (g generic) About() About {
	return About{Name: strings.ToLower(string(g.t)), SourceType: g.t, Noun: "document", Namespaces: []string{"file"}}
}

func (g generic) Shape(d store.Document) Shape {
	var h Header
	h.Line("File", d.ExternalID)
	return Shape{Main: "file:" + d.ExternalID, Props: map[string]any{"title": d.Normalized.Title}, Lines: h.Lines,
		Summary: fmt.Sprintf("File %s: %q.", d.ExternalID, d.Normalized.Title)}
}
