package rag

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/unicode/norm"
)

// MaxQueryTerms is how many words of a keyword query are searched for
// (the first ones): a query is a question, not a document.
const MaxQueryTerms = 32

// StopWord reports words left out of keyword queries: they match nearly
// every chunk and only cost time.
func StopWord(w string) bool {
	switch w {
	case "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "he", "her", "his",
		"i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so",
		"that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what",
		"when", "where", "which", "who", "why", "will", "with", "would", "you", "your", "do", "does", "did", "can",
		"could", "should", "about", "how":
		return true
	}
	return false
}

// Words splits text into its words: runs of letters and digits,
// lower-cased.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// QueryWords returns the distinct Words of text that are not stop words,
// in order, at most limit of them (0: all).
func QueryWords(text string, limit int) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range Words(text) {
		if limit > 0 && len(out) == limit {
			break
		}
		if StopWord(w) || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// Stem is a word's (rag.Words: lower-case) English Snowball stem, its
// accents dropped first ("crêpes" → "crepe"), as FTS5's remove_diacritics
// drops them in the embedded store: what Weaviate's stemmed properties
// hold, and what search's title agreement compares. A word's stem never
// changes, so up to stemCacheSize of them are remembered (then the memory
// starts afresh): a search stems the titles of a hundred items.
func Stem(word string) string {
	stems.Lock()
	s, ok := stems.known[word]
	stems.Unlock()
	if ok {
		return s
	}
	s = english.Stem(foldAccents(word), true)
	if len(word) > stemCacheWordBytes {
		return s // a hash, a base64 run: seldom seen twice
	}
	stems.Lock()
	defer stems.Unlock()
	if stems.known == nil || len(stems.known) >= stemCacheSize {
		stems.known = make(map[string]string)
	}
	// Copies: word may be a slice of a whole text.
	stems.known[strings.Clone(word)] = strings.Clone(s)
	return s
}

// stemCacheSize is how many words' stems are remembered (a few MiB), and
// stemCacheWordBytes the longest word remembered.
const (
	stemCacheSize      = 100_000
	stemCacheWordBytes = 64
)

var stems struct {
	sync.Mutex
	known map[string]string
}

// foldAccents drops combining marks ("crêpes" → "crepes").
func foldAccents(w string) string {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			folded := strings.Map(func(r rune) rune {
				if unicode.Is(unicode.Mn, r) {
					return -1
				}
				return r
			}, norm.NFD.String(w))
			return norm.NFC.String(folded)
		}
	}
	return w
}
