package rag

import (
	"strings"
	"unicode"
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
