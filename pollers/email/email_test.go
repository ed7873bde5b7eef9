package email_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/email"
)

func parse(t *testing.T, path string) (*email.Message, []byte, error) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := email.Parse(raw)
	return m, raw, err
}

func TestGoodMessages(t *testing.T) {
	t.Parallel()
	m, raw, err := parse(t, "testdata/good/alternative.eml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Deploy plan for release 2.3" || m.From != "Ann Novak <ann.novak@acme.test>" ||
		!slices.Equal(m.To, []string{"Bob Smith <bob.smith@acme.test>", "ops@acme.test"}) || len(m.Cc) != 1 ||
		m.MessageID != "20260303081358.4711@acme.test" || m.Date.Format("2006-01-02T15:04") != "2026-03-03T08:13" {
		t.Fatalf("headers: %+v", m)
	}
	if !strings.Contains(m.Text, "please review the runbook at https://wiki.acme.test/ops/runbook?utm_source=mail before Friday") || strings.Contains(m.Text, "<p>") {
		t.Fatalf("text/plain preferred, quoted-printable decoded: %q", m.Text)
	}
	doc := m.Document(raw)
	if doc.ExternalID != m.MessageID || doc.Normalized.Metadata["from"] != "ann.novak@acme.test" || doc.Normalized.Metadata["html"] == nil {
		t.Fatalf("document: %+v", doc.Normalized.Metadata)
	}

	m, _, err = parse(t, "testdata/good/html-only.eml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, "Rotate TLS certificates") || !strings.Contains(m.Text, "**Bob Smith** changed the status") || strings.Contains(m.Text, "<td>") || strings.Contains(m.Text, "color:#333") {
		t.Fatalf("HTML-only converted: %q", m.Text)
	}

	m, _, err = parse(t, "testdata/good/iso-8859-2.eml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Porada o příjmu změn" || m.From != "Jiří Dvořák <jiri.dvorak@acme.test>" || !strings.Contains(m.Text, "schůzka k přijmu změn bude ve čtvrtek v Brně") {
		t.Fatalf("ISO-8859-2: %q / %q / %q", m.Subject, m.From, m.Text)
	}

	m, _, err = parse(t, "testdata/good/utf8-attachment.eml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Faktura № 2291 – splatná" || len(m.Attachments) != 1 || m.Attachments[0].Name != "invoice-2291.pdf" ||
		m.Attachments[0].ContentType != "application/pdf" || m.Attachments[0].Size != 680 || strings.Contains(m.Text, "PDF") {
		t.Fatalf("UTF-8 + attachment: %q %+v %q", m.Subject, m.Attachments, m.Text)
	}

	m, _, err = parse(t, "testdata/good/reply.eml")
	if err != nil {
		t.Fatal(err)
	}
	if m.InReplyTo != "20260303081358.4711@acme.test" || !slices.Equal(m.References, []string{"20260303081358.4711@acme.test"}) {
		t.Fatalf("thread: %+v", m)
	}
	// A directory's "Last, First" names hold a comma: one address each.
	m, err = email.Parse([]byte("From: \"Hawkins, Nick\" <Nick.Hawkins@acme.test>\r\nTo: \"Verdun, Jean-Marie\" <verdun@acme.test>, Rob Herring <robh@acme.test>\r\n" +
		"Cc: \"Lee, Ann\" <ann@acme.test>\r\nSubject: x\r\nMessage-ID: <c@acme.test>\r\n\r\nBody.\r\n"))
	if err != nil || m.From != "Hawkins, Nick <Nick.Hawkins@acme.test>" || !slices.Equal(m.To, []string{"Verdun, Jean-Marie <verdun@acme.test>", "Rob Herring <robh@acme.test>"}) ||
		!slices.Equal(m.Cc, []string{"Lee, Ann <ann@acme.test>"}) || m.Document(nil).Normalized.Metadata["from"] != "nick.hawkins@acme.test" {
		t.Fatalf("names with commas: %v %q %q %q", err, m.From, m.To, m.Cc)
	}
	// Outlook writes commas between References IDs: still a thread.
	m, _, err = parse(t, "testdata/good/references-commas.eml")
	if err != nil || m.InReplyTo != "second@acme.test" || !slices.Equal(m.References, []string{"first@acme.test", "second@acme.test"}) {
		t.Fatalf("references with commas: %+v %v", m, err)
	}
}

func TestBadMessages(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"mime-bomb-nesting.eml": "multipart entities",
		"huge-headers.eml":      "header block",
		"binary.eml":            "not an email message",
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			_, raw, err := parse(t, "testdata/bad/"+file)
			if !errors.Is(err, email.ErrMalformed) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want ErrMalformed mentioning %q", err, want)
			}
			doc := email.Unparsable(raw, err)
			if doc.Normalized.Metadata[store.MetaParseError] != err.Error() || !bytes.Equal(doc.Raw, raw) || doc.ExternalID == "" {
				t.Fatalf("unparsable document: %+v", doc.Normalized)
			}
		})
	}
}

// Real mail that is a little broken is kept: what can be read is read, and
// the document says what was not read as it was (Normalized.Warnings, and
// the decoding ones in metadata decodingIssues).
func TestDegradedMessagesAreKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, text, warning string
		decoding            bool
	}{
		{"truncated.eml", "Hello world, this is tru", "part 1 (text/plain): cut short", true},
		{"invalid-charset.eml", "nuqneH", `unknown charset "x-klingon-9", read as UTF-8`, true},
		{"charset-alias.eml", "构建通过了", `charset "eucgb2312_cn" read as its alias "gb2312"`, true},
		{"invalid-bytes.eml", "The release went out \uFFFD on time", "2 bytes not valid in the declared charset", true},
		{"no-charset-8bit.eml", "Rendez-vous au café à midi.", "no charset declared and not UTF-8, read as Windows-1252", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			m, raw, err := parse(t, "testdata/degraded/"+tc.file)
			if err != nil {
				t.Fatalf("quarantined: %v", err)
			}
			if !strings.Contains(m.Text, tc.text) {
				t.Errorf("text %q lacks %q", m.Text, tc.text)
			}
			doc := m.Document(raw)
			w := strings.Join(doc.Normalized.Warnings, "; ")
			if !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q lack %q", w, tc.warning)
			}
			if _, ok := doc.Normalized.Metadata["decodingIssues"]; ok != tc.decoding {
				t.Errorf("decodingIssues %v, want %v", doc.Normalized.Metadata["decodingIssues"], tc.decoding)
			}
			if _, bad := doc.Normalized.Metadata[store.MetaParseError]; bad {
				t.Error("marked unparsable")
			}
		})
	}
	// A header's subject in an unknown charset is kept best effort.
	m, _, _ := parse(t, "testdata/degraded/no-charset-8bit.eml")
	if m.Subject != "Caf\uFFFD meeting" && m.Subject != "Café meeting" {
		t.Errorf("subject %q", m.Subject)
	}
}

// Only text/* parts are body text: an inline image (a signature logo, a
// pasted screenshot), or one with no disposition at all, is an attachment;
// an .eml saved with its mbox "From " line is read from the next line.
func TestNonTextPartsAreAttachments(t *testing.T) {
	t.Parallel()
	m, raw, err := parse(t, "testdata/good/inline-image.eml")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].ContentType != "image/png" || m.Attachments[0].Name != "logo.png" || m.Attachments[0].Size != 70 ||
		!strings.HasPrefix(m.Text, "The dashboard is green again") || strings.Contains(m.Text, "PNG") || len(m.Warnings) != 0 {
		t.Fatalf("inline image: %+v %q %q", m.Attachments, m.Text, m.Warnings)
	}
	if d := m.Document(raw); len(d.Normalized.Warnings) != 0 {
		t.Fatalf("warnings %q", d.Normalized.Warnings)
	}
	m, _, err = parse(t, "testdata/good/image-no-disposition.eml")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].ContentType != "image/gif" || !strings.Contains(m.Text, "**queue** grows") || len(m.Warnings) != 0 {
		t.Fatalf("image without disposition: %+v %q %q", m.Attachments, m.Text, m.Warnings)
	}
	m, _, err = parse(t, "testdata/good/mbox-from-line.eml")
	if err != nil || m.MessageID != "mbox-line-1@acme.test" || m.From != "Ann Novak <ann@acme.test>" || !strings.HasPrefix(m.Text, "This message was saved") {
		t.Fatalf("mbox From line: %+v %v", m, err)
	}
}

// A text part over the cap is kept up to it and the document says so.
func TestOversizeTextIsCutAndFlagged(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString("From: a@acme.test\r\nTo: b@acme.test\r\nSubject: huge log\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString("xxxxxxxxx") // so that the cut at 8 MiB falls inside a two-byte é
	line := strings.Repeat("é log line ", 10) + "\r\n"
	for b.Len() < email.MaxTextBytes+1<<20 {
		b.WriteString(line)
	}
	m, err := email.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Text) > email.MaxTextBytes || len(m.Text) < email.MaxTextBytes-len(line) || !utf8.ValidString(m.Text) {
		t.Fatalf("text of %d bytes", len(m.Text))
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "cut at 8388608") {
		t.Fatalf("warnings %q", m.Warnings)
	}
}

// A 30 MB attachment is fine: it becomes metadata; its bytes are not text.
func TestLargeAttachment(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString("From: a@acme.test\r\nTo: b@acme.test\r\nSubject: big file\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"x\"\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nSee the dump.\r\n--x\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"dump.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.NewEncoder(base64.StdEncoding, &lineWriter{w: &b})
	chunk := bytes.Repeat([]byte{0xAB}, 1<<20)
	for range 30 {
		enc.Write(chunk)
	}
	enc.Close()
	b.WriteString("\r\n--x--\r\n")
	m, err := email.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Size != 30<<20 || m.Text != "See the dump." {
		t.Fatalf("%+v %q", m.Attachments, m.Text)
	}
}

type lineWriter struct {
	w *bytes.Buffer
	n int
}

func (l *lineWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		l.w.WriteByte(c)
		if l.n++; l.n == 76 {
			l.w.WriteString("\r\n")
			l.n = 0
		}
	}
	return len(p), nil
}

func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/degraded", "testdata/bad"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, err := os.ReadFile(dir + "/" + e.Name()); err == nil && len(b) < 20_000 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := email.Parse(raw)
		if err != nil {
			if !errors.Is(err, email.ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			_ = email.Unparsable(raw, err)
			return
		}
		doc := m.Document(raw)
		if doc.ExternalID == "" {
			t.Fatal("no external id")
		}
	})
}
