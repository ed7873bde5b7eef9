// Package email is the MIME front end shared by the IMAP and file-drop
// sources: it parses one RFC 5322 message (emersion/go-message, with its
// charset registry for ISO-8859-x, Windows-125x, KOI8 and more) into the
// fields the pipeline keeps and a store.Document.
//
// Kept: subject, from, to, cc, date, Message-ID, In-Reply-To, References
// (threading), the text body — text/plain preferred, an HTML-only message
// converted to Markdown-flavoured text (JohannesKaufmann/html-to-markdown) —
// the HTML itself (for its links) and attachments as metadata (name, type,
// size). Encoded words in headers are decoded.
//
// Hostile input is bounded: a message larger than MaxBytes, a header block
// larger than MaxHeaderBytes, more than MaxParts parts, an unknown charset
// or encoding, or broken MIME is an error that says which; sources store
// such a message anyway (raw) with the error, and it is quarantined.
package email

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // registers charsets
	"github.com/emersion/go-message/mail"

	"github.com/jervis-dev/jervis/internal/store"
)

// Limits on one message.
const (
	MaxBytes       = 64 << 20
	MaxHeaderBytes = 256 << 10
	MaxParts       = 500
	MaxMultiparts  = 100     // multipart entities (bounds nesting depth)
	maxTextBytes   = 8 << 20 // body text kept per part
)

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("malformed message")

// Attachment describes an attached file; its content is not kept.
type Attachment struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
}

// Message is a parsed message.
type Message struct {
	MessageID   string
	Subject     string
	From        string
	To, Cc      []string
	Date        time.Time
	InReplyTo   string
	References  []string
	Text        string // the body as text
	HTML        string // the HTML part, when there is one
	Attachments []Attachment
}

// Parse reads one message.
func Parse(raw []byte) (*Message, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(raw), MaxBytes)
	}
	if h := headerSize(raw); h > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header block of %d bytes, more than %d", ErrMalformed, h, MaxHeaderBytes)
	}
	if !looksLikeMessage(raw) {
		return nil, fmt.Errorf("%w: no RFC 5322 header (not an email message)", ErrMalformed)
	}
	if n := bytes.Count(bytes.ToLower(raw), []byte("multipart/")); n > MaxMultiparts {
		return nil, fmt.Errorf("%w: %d nested or sibling multipart entities, more than %d", ErrMalformed, n, MaxMultiparts)
	}
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	defer r.Close()
	m := &Message{}
	h := r.Header
	if m.MessageID, err = h.MessageID(); err != nil {
		m.MessageID = ""
	}
	if m.Subject, err = h.Subject(); err != nil {
		return nil, fmt.Errorf("%w: subject: %v", ErrMalformed, err)
	}
	m.From = addresses(h, "From")
	if len(m.From) > 0 {
		m.From = strings.Split(m.From, ", ")[0]
	}
	m.To = splitNonEmpty(addresses(h, "To"))
	m.Cc = splitNonEmpty(addresses(h, "Cc"))
	if d, err := h.Date(); err == nil {
		m.Date = d.UTC()
	}
	if ids, err := h.MsgIDList("In-Reply-To"); err == nil && len(ids) > 0 {
		m.InReplyTo = ids[0]
	}
	if ids, err := h.MsgIDList("References"); err == nil {
		m.References = ids
	}
	var plain, html strings.Builder
	for parts := 0; ; parts++ {
		if parts == MaxParts {
			return nil, fmt.Errorf("%w: more than %d MIME parts", ErrMalformed, MaxParts)
		}
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil { // broken MIME, an unknown charset or transfer encoding
			return nil, fmt.Errorf("%w: part %d: %v", ErrMalformed, parts+1, err)
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			body, err := io.ReadAll(io.LimitReader(p.Body, maxTextBytes))
			if err != nil {
				return nil, fmt.Errorf("%w: part %d (%s): %v", ErrMalformed, parts+1, ct, err)
			}
			if !utf8.Valid(body) {
				return nil, fmt.Errorf("%w: part %d (%s): text is not valid in its declared charset", ErrMalformed, parts+1, ct)
			}
			switch ct {
			case "text/html":
				html.Write(body)
			default:
				if plain.Len() > 0 {
					plain.WriteString("\n\n")
				}
				plain.Write(body)
			}
		case *mail.AttachmentHeader:
			name, _ := ph.Filename()
			ct, _, _ := ph.ContentType()
			n, err := io.Copy(io.Discard, p.Body)
			if err != nil {
				return nil, fmt.Errorf("%w: attachment %q: %v", ErrMalformed, name, err)
			}
			m.Attachments = append(m.Attachments, Attachment{Name: name, ContentType: ct, Size: n})
		}
	}
	m.HTML = html.String()
	m.Text = strings.TrimSpace(plain.String())
	if m.Text == "" && m.HTML != "" {
		text, err := htmltomarkdown.ConvertString(m.HTML)
		if err != nil {
			return nil, fmt.Errorf("%w: html body: %v", ErrMalformed, err)
		}
		m.Text = strings.TrimSpace(text)
	}
	return m, nil
}

// addresses returns the header's addresses as "Name <addr>" joined by ", ",
// falling back to the decoded raw value when it does not parse.
func addresses(h mail.Header, key string) string {
	list, err := h.AddressList(key)
	if err == nil {
		out := make([]string, len(list))
		for i, a := range list {
			// Not a.String(): it re-encodes non-ASCII names as encoded words.
			out[i] = a.Address
			if a.Name != "" {
				out[i] = a.Name + " <" + a.Address + ">"
			}
		}
		return strings.Join(out, ", ")
	}
	v, err := h.Text(key)
	if err != nil {
		return h.Get(key)
	}
	return v
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ", ")
}

// Address returns the bare address of "Name <addr>" (lower-cased).
func Address(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return strings.ToLower(a.Address)
	}
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>"))
}

// headerSize returns the length of the header block (up to the first empty
// line).
func headerSize(raw []byte) int {
	for _, sep := range [][]byte{[]byte("\r\n\r\n"), []byte("\n\n")} {
		if i := bytes.Index(raw, sep); i >= 0 {
			return i
		}
	}
	return len(raw)
}

// looksLikeMessage checks that the first line is a header field.
func looksLikeMessage(raw []byte) bool {
	line, _, _ := bufio.NewReader(bytes.NewReader(raw)).ReadLine()
	name, _, ok := strings.Cut(string(line), ":")
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return false
	}
	for _, r := range name {
		if r < 33 || r > 126 {
			return false
		}
	}
	return true
}

// Document builds the store document of a message (raw is kept as is).
func (m *Message) Document(raw []byte) store.Document {
	meta := map[string]any{"from": Address(m.From), "fromName": m.From}
	if len(m.To) > 0 {
		meta["to"] = m.To
	}
	if len(m.Cc) > 0 {
		meta["cc"] = m.Cc
	}
	if !m.Date.IsZero() {
		meta["date"] = m.Date.Format(time.RFC3339)
	}
	if m.MessageID != "" {
		meta["messageId"] = m.MessageID
	}
	if m.InReplyTo != "" {
		meta["inReplyTo"] = m.InReplyTo
	}
	if len(m.References) > 0 {
		meta["references"] = m.References
	}
	if len(m.Attachments) > 0 {
		meta["attachments"] = m.Attachments
	}
	if m.HTML != "" {
		meta["html"] = m.HTML
	}
	return store.Document{
		SourceType: store.SourceEmail,
		ExternalID: ExternalID(m.MessageID, raw),
		Raw:        raw,
		ObservedAt: m.Date,
		Normalized: store.Normalized{Title: m.Subject, Body: m.Text, Metadata: meta},
	}
}

// ExternalID is the Message-ID, or a hash of the raw message when there is
// none.
func ExternalID(messageID string, raw []byte) string {
	if messageID != "" {
		return messageID
	}
	return store.HashID(raw)
}

// Unparsable builds the document of a message that could not be parsed: its
// raw bytes, a best-effort subject, and the reason, which makes the indexers
// quarantine it.
func Unparsable(raw []byte, reason error) store.Document {
	subject := ""
	if len(raw) <= MaxBytes {
		if msg, err := message.Read(bytes.NewReader(raw)); err == nil || message.IsUnknownCharset(err) {
			dec := new(mime.WordDecoder)
			if s, err := dec.DecodeHeader(msg.Header.Get("Subject")); err == nil && utf8.ValidString(s) {
				subject = s
			}
		}
	}
	if len(raw) > MaxBytes {
		raw = raw[:MaxBytes] // kept up to the limit; the reason says so
	}
	return store.Unparsable(store.SourceEmail, "", subject, raw, reason)
}
