package email

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers"
)

// Kind is email: messages read from an IMAP server (connections of type
// imap), from .eml files and mailboxes (.mbox; a list archive saved as
// .txt), and how a message becomes knowledge: its sender, recipients and
// its place in a thread.
type Kind struct{}

var (
	_ pollers.Connector  = Kind{}
	_ pollers.FileReader = Kind{}
)

// About implements pollers.Kind.
func (Kind) About() pollers.About {
	return pollers.About{Name: "email", SourceType: store.SourceEmail, Noun: "email",
		Namespaces: []string{"email", "person"}, Extensions: []string{".eml", ".mbox", ".txt"}, ConnectionType: "imap", LinkSources: true}
}

// ReadFile implements pollers.FileReader: an .eml is one message, a
// mailbox is split as it is read (one of any size takes one message's
// memory), a .txt is read only when it starts like a mailbox.
func (Kind) ReadFile(f *pollers.File, emit func(store.Document) error) error {
	switch f.Ext() {
	case ".eml":
		return pollers.ReadWhole(f, emit, pollers.One(messageDocument), nil)
	case ".txt":
		if !looksLikeMbox(f.Peek(4096)) {
			return pollers.Decline(errors.New("it does not start like a mailbox"))
		}
	}
	return mbox(f.Name, f.Stream(), emit)
}

// messageDocument is the document of one message: parsed, or unparsable
// with the reason.
func messageDocument(raw []byte) store.Document {
	m, err := Parse(raw)
	if err != nil {
		return Unparsable(raw, err)
	}
	return m.Document(raw)
}

// RefOf returns the ref of a message's node by its Message-ID (a long one
// keeps a prefix and a hash: kb.BoundedRef).
func RefOf(messageID string) string { return kb.BoundedRef("email", messageID) }

// Shape implements pollers.Kind: the message's node, sent_by, sent_to and
// cc its people, and replies_to along In-Reply-To and the chain of
// ancestors References records, so that a thread whose middle message is
// missing stays connected.
func (Kind) Shape(d store.Document) pollers.Shape {
	var m Meta
	pollers.DecodeMeta(d, &m)
	main := RefOf(d.ExternalID)
	var h pollers.Header
	h.Line("Subject", d.Normalized.Title)
	if m.From != "" {
		h.Rel(main, "sent_by", pollers.Person(m.From), h.Line("From", m.FromName))
	}
	for _, to := range m.To {
		h.Rel(main, "sent_to", pollers.Person(to), h.Line("To", to))
	}
	for _, cc := range m.Cc {
		h.Rel(main, "cc", pollers.Person(cc), h.Line("Cc", cc))
	}
	replyChain(&h, main, m.InReplyTo, m.References)
	var who pollers.Who
	if m.From != "" {
		who.Address(or(m.FromName, m.From), "From: "+m.FromName, true)
	}
	for _, to := range m.To {
		who.Address(to, "To: "+to, false)
	}
	for _, cc := range m.Cc {
		who.Address(cc, "Cc: "+cc, false)
	}
	var date any
	if m.Date != "" {
		date = m.Date
	}
	summary := fmt.Sprintf("Email %q from %s to %s", d.Normalized.Title, m.FromName, strings.Join(m.To, ", "))
	if m.Date != "" {
		summary += " on " + m.Date
	}
	return pollers.Shape{
		Main: main, Props: map[string]any{"title": d.Normalized.Title, "date": date}, Lines: h.Lines, Relations: h.Relations,
		Summary: summary + ".", From: or(m.FromName, m.From), Sender: m.From, To: m.To, Cc: m.Cc, Conversational: true, HTML: m.HTML,
		Identities: who.Facts,
	}
}

// maxChain bounds the reply edges one message's References header adds.
const maxChain = 50

// replyChain adds an email's reply edges: to its parent (In-Reply-To, or
// the last of References), and along the chain of ancestors References
// records, each to the one before it; and in_thread to the thread's first
// message.
func replyChain(h *pollers.Header, main, inReplyTo string, refs []string) {
	var refsLine string
	references := func() string { // the References line, written once
		if refsLine == "" {
			refsLine = h.Line("References", strings.Join(refs, " "))
		}
		return refsLine
	}
	parent := inReplyTo
	if parent == "" && len(refs) > 0 {
		parent = refs[len(refs)-1]
	}
	if parent != "" && RefOf(parent) != main {
		if inReplyTo != "" {
			h.Rel(main, "replies_to", RefOf(parent), h.Line("In-Reply-To", parent))
		} else {
			h.Rel(main, "replies_to", RefOf(parent), references())
		}
	}
	if len(refs) == 0 {
		return
	}
	chain := refs
	for i, r := range refs {
		if r == parent {
			chain = refs[:i+1]
			break
		}
	}
	chain = chain[max(0, len(chain)-maxChain):]
	for i := len(chain) - 1; i > 0; i-- {
		if chain[i] != chain[i-1] {
			h.Rel(RefOf(chain[i]), "replies_to", RefOf(chain[i-1]), references())
		}
	}
	h.Rel(main, "in_thread", RefOf(refs[0]), h.Line("Thread", refs[0]))
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// IMAPSettings are an imap connection's section. The password is read from
// an environment variable or a file, never written in the configuration.
type IMAPSettings struct {
	Addr         string   `yaml:"addr"` // host:port
	TLS          string   `yaml:"tls"`  // tls, starttls or none
	Username     string   `yaml:"username"`
	PasswordEnv  string   `yaml:"password_env"`
	PasswordFile string   `yaml:"password_file"`
	Mailboxes    []string `yaml:"mailboxes"`
}

// Configure implements pollers.Connector.
func (Kind) Configure(s pollers.Settings) (pollers.Configured, error) {
	var c IMAPSettings
	if err := s.Decode("imap", &c); err != nil {
		return nil, err
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, s.Invalid("imap.addr", "%q is not host:port", c.Addr))
	}
	if c.Username == "" {
		errs = append(errs, s.Invalid("imap.username", "required"))
	}
	if err := s.OneSecret("imap", "password_env", "password_file", c.PasswordEnv, c.PasswordFile); err != nil {
		errs = append(errs, err)
	}
	if t := c.TLS; t != "" && t != TLS && t != StartTLS && t != Plain {
		errs = append(errs, s.Invalid("imap.tls", "%q is not tls, starttls or none", t))
	}
	return pollers.Configuration[IMAPSettings]{Section: c, Settings: s, Open: open}, errors.Join(errs...)
}

// open builds the source of a connection Configure accepted.
func open(c IMAPSettings, s pollers.Settings) (pollers.Source, error) {
	password, err := s.Secret(c.PasswordEnv, c.PasswordFile)
	if err != nil {
		return nil, err
	}
	return NewIMAP(IMAPConfig{Addr: c.Addr, TLS: c.TLS, Username: c.Username, Password: password, Mailboxes: c.Mailboxes})
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
		var whole bytes.Buffer
		if _, rerr := io.Copy(&whole, io.LimitReader(br, pollers.MaxFileBytes+1)); rerr != nil {
			return rerr
		}
		raw := whole.Bytes()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(raw) > pollers.MaxFileBytes {
			return emit(pollers.TooLarge(name, raw))
		}
		return emit(pollers.UnparsableFile(name, raw, store.SourceEmail, errors.New(`mbox: the first line is not a "From " separator`)))
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
		return emit(messageDocument(append([]byte(nil), raw...)))
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
			if cur.Len() <= MaxBytes { // a bigger message is quarantined with its first bytes
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
