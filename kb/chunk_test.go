package kb_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/kb"
)

// Consecutive paragraphs are packed into chunks of up to kb.ChunkTokens
// tokens; one that would cross it starts the next chunk; offsets give the
// text exactly, the blank lines between packed paragraphs included.
func TestChunkPacksParagraphs(t *testing.T) {
	t.Parallel()
	long := strings.TrimSpace(strings.Repeat("word ", kb.ChunkTokens*2/3))
	text := "Title\n\nFirst paragraph has a few words.\n\n\n   Second paragraph, short too.  \n\n" + long + "\n\n" + long + "\n\nEnd."
	spans := kb.Chunk(text)
	if len(spans) != 2 {
		t.Fatalf("%d spans: %+v", len(spans), spans)
	}
	// The three short paragraphs and the first long one make one chunk;
	// the second long one (it would cross the size) and "End." the next.
	if !strings.HasPrefix(spans[0].Text, "Title\n\nFirst") || !strings.HasSuffix(spans[0].Text, "short too.  \n\n"+long) ||
		spans[1].Text != long+"\n\nEnd." {
		t.Fatalf("spans: %+v", spans)
	}
	for _, s := range spans {
		if text[s.Start:s.End] != s.Text {
			t.Fatalf("offsets %d..%d do not give %q", s.Start, s.End, s.Text)
		}
	}
}

func TestChunkSplitsLongParagraphs(t *testing.T) {
	t.Parallel()
	para := strings.Repeat("word ", 2000)
	spans := kb.Chunk(para)
	if len(spans) < 4 {
		t.Fatalf("%d spans for 2000 words", len(spans))
	}
	total := 0
	for _, s := range spans {
		if n := len(strings.Fields(s.Text)); n > kb.MaxChunkTokens {
			t.Fatalf("span of %d words", n)
		}
		total += len(strings.Fields(s.Text))
	}
	if total != 2000 {
		t.Fatalf("%d words kept of 2000", total)
	}
}

func TestChunkWindowsLongDocuments(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("Ünïcödé words make a long document. ", 2000) // ≥ 40,000 characters
	spans := kb.Chunk(text)
	if len(spans) < 17 {
		t.Fatalf("%d windows", len(spans))
	}
	for i, s := range spans {
		n := utf8.RuneCountInString(s.Text)
		if n > kb.WindowSize || !utf8.ValidString(s.Text) || text[s.Start:s.End] != s.Text {
			t.Fatalf("window %d: %d chars, valid %v", i, n, utf8.ValidString(s.Text))
		}
		if i > 0 {
			overlap := utf8.RuneCountInString(text[s.Start:min(spans[i-1].End, s.End)])
			if overlap < kb.WindowOverlap-110 || overlap > kb.WindowOverlap+10 {
				t.Fatalf("window %d overlaps the previous by %d chars", i, overlap)
			}
		}
	}
	if spans[len(spans)-1].End < len(strings.TrimSpace(text)) {
		t.Fatal("the end of the document is not covered")
	}
}

func TestChunkBlank(t *testing.T) {
	t.Parallel()
	if spans := kb.Chunk(" \n\n\t\n"); len(spans) != 0 {
		t.Fatalf("%+v", spans)
	}
}
