// Package email is the MIME front end shared by the IMAP and file-drop
// sources: it parses one RFC 5322 message (emersion/go-message, with its
// charset registry for ISO-8859-x, Windows-125x, KOI8 and more) into the
// fields the pipeline keeps and a store.Document.
//
// Kept: subject, from, to, cc, date, Message-ID, In-Reply-To, References
// (threading), the text body — the text/* parts that are not attachments,
// text/plain preferred, an HTML-only message converted to Markdown-flavoured
// text (JohannesKaufmann/html-to-markdown) — the HTML itself (for its links)
// and attachments as metadata (name, type, size): every part that is not
// text, whatever its disposition (an inline logo or a pasted screenshot is
// an attachment). Encoded words in headers are decoded.
//
// Real mail is often a little broken; what can be read is kept and what
// could not be read as it was is said in Message.Warnings (and so in the
// document's Normalized.Warnings): a text part whose charset is unknown or
// misspelt (aliases such as eucgb2312_cn are resolved; otherwise UTF-8 or
// Windows-1252, best effort), invalid bytes (replaced by U+FFFD), an unknown
// transfer encoding, a part cut short, a MIME structure that breaks off
// (the parts before the break are kept), a text part over the size cap
// (kept up to it). A message that starts with an mbox "From " line is read
// from the line after it.
//
// Only what cannot be read at all is an error (ErrMalformed, and sources
// store the message raw with the reason, to be quarantined): no header, a
// message larger than MaxBytes, a header block larger than MaxHeaderBytes,
// more multipart entities than MaxMultiparts (a MIME bomb).
package email

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/mail"
	"golang.org/x/text/encoding/charmap"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// Limits on one message.
const (
	MaxBytes       = 64 << 20
	MaxHeaderBytes = 256 << 10
	MaxParts       = 500     // parts read; the rest are left out with a warning
	MaxMultiparts  = 100     // multipart entities (bounds nesting depth)
	MaxTextBytes   = 8 << 20 // text kept per part; the rest is cut with a warning
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
	// DecodingIssues are the text parts that could not be decoded exactly
	// as declared (charset, transfer encoding, invalid bytes).
	DecodingIssues []string
	// Warnings are everything that was not kept as it was: the decoding
	// issues, text cut at MaxTextBytes, a broken MIME structure, parts
	// beyond MaxParts.
	Warnings []string
}

func (m *Message) decodingIssue(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	m.DecodingIssues = append(m.DecodingIssues, s)
	m.Warnings = append(m.Warnings, s)
}

func (m *Message) warn(format string, args ...any) {
	m.Warnings = append(m.Warnings, fmt.Sprintf(format, args...))
}

// Parse reads one message.
func Parse(raw []byte) (*Message, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(raw), MaxBytes)
	}
	raw = skipMboxLine(raw)
	if h := headerSize(raw); h > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header block of %d bytes, more than %d", ErrMalformed, h, MaxHeaderBytes)
	}
	if !looksLikeMessage(raw) {
		return nil, fmt.Errorf("%w: no RFC 5322 header (not an email message)", ErrMalformed)
	}
	if n := countMultipart(raw); n > MaxMultiparts {
		return nil, fmt.Errorf("%w: %d nested or sibling multipart entities, more than %d", ErrMalformed, n, MaxMultiparts)
	}
	e, topErr := message.Read(bytes.NewReader(raw))
	if topErr != nil && !message.IsUnknownCharset(topErr) && !message.IsUnknownEncoding(topErr) {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, topErr)
	}
	topType, _ := mediaType(e.Header.Get("Content-Type"))
	r := mail.NewReader(e)
	defer r.Close()
	m := &Message{}
	h := r.Header
	var err error
	if m.MessageID, err = h.MessageID(); err != nil {
		m.MessageID = ""
	}
	m.MessageID = validText(m.MessageID)
	if m.Subject, err = h.Subject(); err != nil || !utf8.ValidString(m.Subject) {
		m.Subject = bestEffortHeader(h.Get("Subject"))
		m.decodingIssue("subject: not valid in its charset, decoded best effort")
	}
	if from := addresses(h, "From"); len(from) > 0 {
		m.From = from[0]
	}
	m.To = addresses(h, "To")
	m.Cc = addresses(h, "Cc")
	if d, err := h.Date(); err == nil {
		m.Date = d.UTC()
	}
	if ids := msgIDs(h, "In-Reply-To"); len(ids) > 0 {
		m.InReplyTo = ids[0]
	}
	m.References = msgIDs(h, "References")
	var plain, html strings.Builder
	for n := 1; ; n++ {
		if n > MaxParts {
			m.warn("more than %d MIME parts: the rest are left out", MaxParts)
			break
		}
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if n == 1 && err == nil && !strings.HasPrefix(topType, "multipart/") {
			err = topErr // a single-part message: its charset is the message's
		}
		if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
			// Broken MIME: what came before the break is kept.
			m.warn("MIME structure broken at part %d: %v", n, err)
			break
		}
		ct, params := mediaType(p.Header.Get("Content-Type"))
		label := fmt.Sprintf("part %d (%s)", n, ct)
		if _, isAttachment := p.Header.(*mail.AttachmentHeader); strings.HasPrefix(ct, "text/") && (!isAttachment || !hasFilename(p.Header)) {
			text := m.readText(label, p.Body, params["charset"], err)
			switch ct {
			case "text/html":
				html.WriteString(text)
			default:
				if plain.Len() > 0 && text != "" {
					plain.WriteString("\n\n")
				}
				plain.WriteString(text)
			}
			continue
		}
		size, rerr := io.Copy(io.Discard, p.Body)
		if rerr != nil {
			m.warn("%s: attachment cut short after %d bytes: %v", label, size, rerr)
		}
		m.Attachments = append(m.Attachments, Attachment{Name: validText(filename(p.Header)), ContentType: validText(ct), Size: size})
	}
	m.HTML = html.String()
	m.Text = strings.TrimSpace(plain.String())
	if m.Text == "" && m.HTML != "" {
		text, err := htmltomarkdown.ConvertString(m.HTML)
		if err != nil {
			m.warn("html body could not be converted to text: %v", err)
		}
		m.Text = strings.TrimSpace(text)
	}
	return m, nil
}

// readText reads a text part as UTF-8, best effort: go-message has already
// decoded the transfer encoding and a charset it knows (partErr says when
// it did not know one); an alias is resolved, an unknown charset is read as
// UTF-8 when the bytes are, else as Windows-1252; invalid bytes become
// U+FFFD; text over MaxTextBytes is cut. Each such step is a warning.
func (m *Message) readText(label string, body io.Reader, declared string, partErr error) string {
	b, err := io.ReadAll(io.LimitReader(body, MaxTextBytes+1))
	if err != nil {
		m.decodingIssue("%s: cut short after %d bytes: %v", label, len(b), err)
	}
	if len(b) > MaxTextBytes {
		rest, _ := io.Copy(io.Discard, body)
		m.warn("%s: text of %d bytes cut at %d", label, int64(len(b))+rest, MaxTextBytes)
		b = b[:MaxTextBytes]
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ { // no rune split at the cut
			if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	switch {
	case message.IsUnknownEncoding(partErr):
		m.decodingIssue("%s: %v; kept as it was", label, partErr)
	case message.IsUnknownCharset(partErr):
		b = m.decodeUnknownCharset(label, declared, b)
	}
	if !utf8.Valid(b) && declared == "" {
		// No charset and 8-bit bytes that are not UTF-8: most often a
		// Windows or Latin-1 mailer; every byte is a character there.
		b, _ = charmap.Windows1252.NewDecoder().Bytes(b)
		m.decodingIssue("%s: no charset declared and not UTF-8, read as Windows-1252 (best effort)", label)
	}
	if !utf8.Valid(b) {
		n := invalidBytes(b)
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
		m.decodingIssue("%s: %d bytes not valid in the declared charset %q replaced by U+FFFD", label, n, declared)
	}
	return string(b)
}

// decodeUnknownCharset decodes b, whose declared charset go-message does
// not know: through an alias of a known one, else as UTF-8 when it is valid
// UTF-8, else as Windows-1252 (every byte is a character there).
func (m *Message) decodeUnknownCharset(label, declared string, b []byte) []byte {
	for _, alias := range charsetAliases(declared) {
		r, err := charset.Reader(alias, bytes.NewReader(b))
		if err != nil {
			continue
		}
		if out, err := io.ReadAll(r); err == nil {
			m.decodingIssue("%s: charset %q read as its alias %q", label, declared, alias)
			return out
		}
	}
	if utf8.Valid(b) {
		m.decodingIssue("%s: unknown charset %q, read as UTF-8", label, declared)
		return b
	}
	out, _ := charmap.Windows1252.NewDecoder().Bytes(b)
	m.decodingIssue("%s: unknown charset %q, read as Windows-1252 (best effort)", label, declared)
	return out
}

// charsetNames maps charset names that mail programs write and the
// registry does not know (Python's codec names, Windows code pages, MySQL's)
// to ones it does, keyed by the name with everything but letters and
// digits removed.
var charsetNames = map[string]string{
	"eucgb2312cn": "gb2312", "euccn": "gb2312", "cp936": "gbk", "ms936": "gbk", "gb18030": "gb18030",
	"big5tw": "big5", "big5hkscs": "big5", "cp950": "big5",
	"cp932": "shift_jis", "ms932": "shift_jis", "sjis": "shift_jis", "shiftjis": "shift_jis", "eucjp": "euc-jp",
	"cp949": "euc-kr", "ms949": "euc-kr", "ksc56011987": "euc-kr", "euckr": "euc-kr",
	"utf8": "utf-8", "utf8mb4": "utf-8", "utf8mb3": "utf-8", "unicode11utf8": "utf-8",
	"latin1": "iso-8859-1", "latin2": "iso-8859-2", "latin9": "iso-8859-15", "ascii": "us-ascii", "ansi": "windows-1252",
	"macroman": "macintosh", "koi8r": "koi8-r", "koi8u": "koi8-u",
}

// charsetAliases returns the names worth trying for a charset the registry
// did not know: spelling variants and the table above.
func charsetAliases(name string) []string {
	n := strings.ToLower(strings.Trim(strings.TrimSpace(name), `"'`))
	if n == "" {
		return nil
	}
	bare := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.TrimPrefix(n, "x-"))
	var out []string
	for _, c := range []string{
		strings.ReplaceAll(n, "_", "-"), strings.TrimPrefix(n, "x-"), "x-" + n, bare, charsetNames[bare],
		strings.TrimSuffix(strings.ReplaceAll(n, "_", "-"), "-cn"),
	} {
		if c != "" && c != n && !contains(out, c) {
			out = append(out, c)
		}
	}
	// cp1252 → windows-1252, iso8859_15 → iso-8859-15
	if rest, ok := strings.CutPrefix(bare, "cp"); ok && len(rest) == 4 && strings.HasPrefix(rest, "12") {
		out = append(out, "windows-"+rest)
	}
	if rest, ok := strings.CutPrefix(bare, "iso8859"); ok && rest != "" {
		out = append(out, "iso-8859-"+rest)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// invalidBytes counts the bytes of b that are not part of valid UTF-8.
func invalidBytes(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			n++
		}
		b = b[size:]
	}
	return n
}

// skipMboxLine drops an mbox "From " separator line that starts an .eml
// saved from a mailbox.
func skipMboxLine(raw []byte) []byte {
	if !bytes.HasPrefix(raw, []byte("From ")) {
		return raw
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

var angleID = regexp.MustCompile(`<([^<>\s]+)>`)

// msgIDs reads a list of message IDs; a list the RFC 5322 grammar refuses
// (commas between the IDs, text around them, as some mailers write) is
// read as the <...> IDs it contains.
func msgIDs(h mail.Header, key string) []string {
	ids, err := h.MsgIDList(key)
	if err != nil {
		ids = nil
		for _, m := range angleID.FindAllStringSubmatch(h.Get(key), -1) {
			ids = append(ids, m[1])
		}
	}
	for i, id := range ids {
		ids[i] = validText(id)
	}
	return ids
}

// mediaType returns a part's media type (text/plain when it has none) and
// parameters; a malformed header still yields its type when one can be
// read before the first ";".
func mediaType(v string) (string, map[string]string) {
	if strings.TrimSpace(v) == "" {
		return "text/plain", nil
	}
	ct, params, err := mime.ParseMediaType(v)
	if err != nil {
		ct, _, _ = strings.Cut(v, ";")
		ct = strings.ToLower(strings.TrimSpace(ct))
		if !strings.Contains(ct, "/") {
			ct = "application/octet-stream"
		}
	}
	return ct, params
}

// hasFilename reports whether a part names a file (a text attachment).
func hasFilename(h mail.PartHeader) bool { return filename(h) != "" }

// filename is the part's file name: the disposition's filename, else the
// content type's name.
func filename(ph mail.PartHeader) string {
	dec := new(mime.WordDecoder)
	if _, params, err := mime.ParseMediaType(ph.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return decodeWords(dec, params["filename"])
	}
	if _, params, err := mime.ParseMediaType(ph.Get("Content-Type")); err == nil {
		return decodeWords(dec, params["name"])
	}
	return ""
}

func decodeWords(dec *mime.WordDecoder, s string) string {
	if out, err := dec.DecodeHeader(s); err == nil {
		return out
	}
	return s
}

// bestEffortHeader decodes a header value whose encoded words could not all
// be decoded: what decodes is kept, invalid bytes become U+FFFD.
func bestEffortHeader(v string) string {
	dec := &mime.WordDecoder{CharsetReader: func(cs string, in io.Reader) (io.Reader, error) {
		if r, err := charset.Reader(cs, in); err == nil {
			return r, nil
		}
		return charmap.Windows1252.NewDecoder().Reader(in), nil
	}}
	out, err := dec.DecodeHeader(v)
	if err != nil {
		out = v
	}
	return validText(out)
}

// validText returns s when it is UTF-8, else s read as Windows-1252 (raw
// 8-bit bytes in a header, best effort).
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, _ := charmap.Windows1252.NewDecoder().String(s)
	return out
}

// addresses returns the header's addresses, each as "Name <addr>" (a name
// may hold a comma: "Hawkins, Nick" <nick@…> is one address), falling back
// to the decoded raw value split at ", " when it does not parse.
func addresses(h mail.Header, key string) []string {
	list, err := h.AddressList(key)
	if err == nil {
		var out []string
		for _, a := range list {
			// Not a.String(): it re-encodes non-ASCII names as encoded words.
			s := a.Address
			if a.Name != "" {
				s = a.Name + " <" + a.Address + ">"
			}
			out = append(out, validText(s))
		}
		return out
	}
	v, err := h.Text(key)
	if err != nil {
		v = bestEffortHeader(h.Get(key))
	}
	if v = validText(v); v == "" {
		return nil
	}
	return strings.Split(v, ", ")
}

// Address returns the bare address of "Name <addr>" (lower-cased; a name
// may hold a comma).
func Address(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return strings.ToLower(a.Address)
	}
	if _, addr := pollers.SplitAddress(s); addr != "" {
		return addr
	}
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>"))
}

// countMultipart counts "multipart/" in raw, in any case, as a MIME bomb's
// guard: each '/' is looked at, where a copy of raw in lower case (the
// first way) was 38 % of a mailing list's parse.
func countMultipart(raw []byte) int {
	const word = "multipart"
	n := 0
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '/')
		if j < 0 {
			return n
		}
		i += j + 1 // past the '/'
		if start := i - 1 - len(word); start >= 0 && bytes.EqualFold(raw[start:i-1], []byte(word)) {
			n++
		}
	}
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

// Meta is an email document's metadata (Normalized.Metadata), as Parse
// writes it and Shape reads it.
type Meta struct {
	From           string       `json:"from"`     // the sender's bare address, lower-cased
	FromName       string       `json:"fromName"` // "Name <address>" as written
	To             []string     `json:"to,omitempty"`
	Cc             []string     `json:"cc,omitempty"`
	Date           string       `json:"date,omitempty"` // RFC 3339
	MessageID      string       `json:"messageId,omitempty"`
	InReplyTo      string       `json:"inReplyTo,omitempty"`
	References     []string     `json:"references,omitempty"`
	Attachments    []Attachment `json:"attachments,omitempty"`
	HTML           string       `json:"html,omitempty"`
	DecodingIssues []string     `json:"decodingIssues,omitempty"`
	Mailbox        string       `json:"mailbox,omitempty"` // IMAP: the mailbox and UID it was read from
	UID            uint32       `json:"uid,omitempty"`
}

// Document builds the store document of a message (raw is kept as is).
func (m *Message) Document(raw []byte) store.Document {
	meta := Meta{From: Address(m.From), FromName: m.From, To: m.To, Cc: m.Cc, MessageID: m.MessageID, InReplyTo: m.InReplyTo,
		References: m.References, Attachments: m.Attachments, HTML: m.HTML, DecodingIssues: m.DecodingIssues}
	if !m.Date.IsZero() {
		meta.Date = m.Date.Format(time.RFC3339)
	}
	return store.Document{
		SourceType: store.SourceEmail,
		ExternalID: ExternalID(m.MessageID, raw),
		Raw:        raw,
		ObservedAt: m.Date,
		Normalized: store.Normalized{Title: m.Subject, Body: m.Text, Metadata: pollers.MetaMap(meta), Warnings: m.Warnings},
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
