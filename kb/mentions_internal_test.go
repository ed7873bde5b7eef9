package kb

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// mentionSpans finds what mentionRE finds, on lines made at random of
// namespaces (lower and upper case, too long), colons, values, URLs, e-mail
// addresses, words, digits, non-ASCII letters, invalid UTF-8 and every
// character that ends a value or may not come before a namespace.
func TestMentionSpansFindWhatTheRegexpFinds(t *testing.T) {
	pieces := []string{"jira", "ticket", "order", "Jira", "x", "ab", "a1", "a_b", "_a", "1a", strings.Repeat("n", 31), strings.Repeat("n", 32), strings.Repeat("n", 33),
		":", ":", "::", "123", "TIMOB-20011", "é", "日本", "Ω", "\xff", "\xc3", "http://a.test/x:y", "ann@acme.test", "re:", "note:",
		" ", " ", "\t", "\v", "\u00a0", ".", ",", ";", "|", "(", ")", "[", "]", "{", "}", "<", ">", "\"", "'", "`", "/", "@", "-", "=", "$", "%", "!", "?", "_"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		var b strings.Builder
		for range 1 + r.IntN(14) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		line := b.String()
		var want [][4]int
		for _, m := range mentionRE.FindAllStringSubmatchIndex(line, -1) {
			want = append(want, [4]int{m[2], m[3], m[4], m[5]})
		}
		if got := mentionSpans(line); !slices.Equal(got, want) {
			t.Fatalf("mentions in %q: %v, the regexp %v", line, got, want)
		}
	}
}
