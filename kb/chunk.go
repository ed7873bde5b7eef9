package kb

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chunking limits (ARCHITECTURE §5, qualifier step 3).
const (
	// ChunkTokens is the size consecutive paragraphs are packed up to: a
	// chunk is a passage, not a line (an issue's description and its first
	// comments, a mail's body), so that BM25 and the vectors see enough of
	// an item at once. Measured on the dev Jira corpus against 128 and 512.
	ChunkTokens     = 256
	MaxChunkTokens  = 512    // a paragraph is split above this
	WindowThreshold = 40_000 // characters; longer documents are windowed
	WindowSize      = 4_000  // characters per window
	WindowOverlap   = 200    // characters shared by neighbouring windows
)

// Span is a chunk of a document: its text and byte offsets in the document.
type Span struct {
	Text       string
	Start, End int
}

// Chunk splits text into spans: consecutive paragraphs (blank-line
// separated) packed up to ChunkTokens tokens, a paragraph over
// MaxChunkTokens split at whitespace; documents of WindowThreshold
// characters or more are cut into WindowSize-character windows overlapping
// by WindowOverlap, each ending at whitespace where one is near. A span's
// offsets give its text exactly (the blank lines between packed paragraphs
// included); spans hold no blank text.
func Chunk(text string) []Span {
	if utf8.RuneCountInString(text) >= WindowThreshold {
		return windows(text)
	}
	var out []Span
	var cur *Span
	curTokens := 0
	flush := func() {
		if cur != nil && strings.TrimSpace(cur.Text) != "" {
			out = append(out, *cur)
		}
		cur, curTokens = nil, 0
	}
	for _, p := range paragraphs(text) {
		n := tokens(p.Text)
		switch {
		case n > MaxChunkTokens:
			flush()
			out = append(out, splitTokens(text, p)...)
		case cur != nil && curTokens+n <= ChunkTokens:
			cur.End = p.End
			cur.Text = text[cur.Start:cur.End]
			curTokens += n
		default:
			flush()
			cur, curTokens = &Span{Text: p.Text, Start: p.Start, End: p.End}, n
		}
	}
	flush()
	return out
}

// paragraphs returns the blank-line separated paragraphs of text, trimmed.
func paragraphs(text string) []Span {
	var out []Span
	start, offset := -1, 0
	end := 0
	for line := range strings.Lines(text) {
		blank := strings.TrimSpace(line) == ""
		switch {
		case blank && start >= 0:
			out = append(out, trimmed(text, start, end))
			start = -1
		case !blank:
			if start < 0 {
				start = offset
			}
			end = offset + len(line)
		}
		offset += len(line)
	}
	if start >= 0 {
		out = append(out, trimmed(text, start, end))
	}
	return out
}

func trimmed(text string, start, end int) Span {
	s := text[start:end]
	lead := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	s = strings.TrimSpace(s)
	return Span{Text: s, Start: start + lead, End: start + lead + len(s)}
}

// tokens estimates model tokens: about one per word, one per 4 bytes of a
// long word, and one per punctuation mark.
func tokens(s string) int {
	n := 0
	inWord, wordLen := false, 0
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				inWord, wordLen = true, 0
				n++
			}
			wordLen++
			if wordLen > 6 && wordLen%4 == 3 {
				n++
			}
		case unicode.IsSpace(r):
			inWord = false
		default:
			inWord = false
			n++
		}
	}
	return n
}

// splitTokens cuts an over-long paragraph at whitespace into pieces of at
// most MaxChunkTokens tokens.
func splitTokens(text string, p Span) []Span {
	var out []Span
	start := p.Start
	count := 0
	lastSpace := -1
	for i, r := range text[p.Start:p.End] {
		at := p.Start + i
		if unicode.IsSpace(r) {
			lastSpace = at
			continue
		}
		count += tokens(string(r))
		if count > MaxChunkTokens-8 && lastSpace > start {
			out = append(out, trimmed(text, start, lastSpace))
			start, count = lastSpace, 0
		}
	}
	if start < p.End {
		out = append(out, trimmed(text, start, p.End))
	}
	return out
}

// windows cuts a long document into overlapping windows of characters.
func windows(text string) []Span {
	var out []Span
	// byte offset of every WindowSize-th rune would need a full index; walk.
	offsets := make([]int, 0, utf8.RuneCountInString(text)+1)
	for i := range text {
		offsets = append(offsets, i)
	}
	offsets = append(offsets, len(text))
	runes := len(offsets) - 1
	for lo := 0; lo < runes; {
		hi := min(lo+WindowSize, runes)
		if hi < runes {
			// end at whitespace within the last 100 characters when possible
			for k := hi; k > hi-100 && k > lo; k-- {
				if r, _ := utf8.DecodeRuneInString(text[offsets[k]:]); unicode.IsSpace(r) {
					hi = k
					break
				}
			}
		}
		s := trimmed(text, offsets[lo], offsets[hi])
		if s.Text != "" {
			out = append(out, s)
		}
		if hi == runes {
			break
		}
		lo = max(hi-WindowOverlap, lo+1)
	}
	return out
}
