package links

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// textURL is the regular expression textURLs replaced: the reference its
// matches are checked against.
var textURL = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"'` + "`" + `{}|\\^\[\]]+`)

func matches(text string) [][2]int {
	var out [][2]int
	for s, e := range textURLs(text) {
		out = append(out, [2]int{s, e})
	}
	return out
}

func reference(text string) [][2]int {
	var out [][2]int
	for _, m := range textURL.FindAllStringIndex(text, -1) {
		out = append(out, [2]int{m[0], m[1]})
	}
	return out
}

// textURLs finds what the regexp finds: the cases that tell them apart,
// then random texts made of the pieces that matter (schemes in every case,
// word characters before them, the bytes that end a URL, "://" alone,
// long s, Kelvin sign, invalid UTF-8).
func TestTextURLsAsTheRegexp(t *testing.T) {
	cases := []string{
		"", "://", "http://", "http:// x", "see http://a.test/x, and HTTPS://B.test/y.",
		"xhttp://a.test", "_https://a.test", "é http://a.test", "éhttp://a.test", "1http://a",
		"http://a.test/?u=http://b.test", "httpſ://a.test", "HTTPſ://a", "httpK://a", "hthttp://a",
		"https://a\tb", "http://a<b>", "http://a\vb", "http://a\x85b", "http://\xffa", "ttps://a", "https:/a",
		"http://a" + strings.Repeat("b", 5000), "https://" + strings.Repeat("://", 10),
	}
	for _, c := range cases {
		if got, want := matches(c), reference(c); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", c, got, want)
		}
	}
	pieces := []string{"http", "https", "HTTP", "hTtPs", "httpſ", "ſ", "K", "k", "://", ":/", "/", "a", "Z", "_", "9", ".",
		" ", "\t", "\n", "\v", "\f", "\r", "<", ">", "\"", "'", "`", "{", "}", "|", "\\", "^", "[", "]", "é", "\xff", "\xc5", "?u=", "#"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(24) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		c := b.String()
		if got, want := matches(c), reference(c); !slices.Equal(got, want) {
			t.Fatalf("%q: %v, want %v", c, got, want)
		}
	}
}

func FuzzTextURLs(f *testing.F) {
	f.Add("see http://a.test/x and HTTPS://b.test")
	f.Add("xhttp://a httpſ://b http://")
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := matches(text), reference(text); !slices.Equal(got, want) {
			t.Fatalf("%q: %v, want %v", text, got, want)
		}
	})
}

// prose is about 100 KiB of words with a link every few hundred bytes.
func prose() string {
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"the", "window", "crashes", "when", "opening", "Ti.UI.Window", "on", "Android", "see", "log:", "error", "at", "line", "42", "(build", "failed)"}
	var b strings.Builder
	for b.Len() < 100<<10 {
		if r.IntN(60) == 0 {
			b.WriteString("https://jira.example.test/browse/TIMOB-" + words[r.IntN(len(words))] + " ")
			continue
		}
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(" \n"[r.IntN(8)/7])
	}
	return b.String()
}

// BenchmarkTextURLs compares the scan with the regexp it replaced.
func BenchmarkTextURLs(b *testing.B) {
	text := prose()
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			for range textURLs(text) {
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			textURL.FindAllStringIndex(text, -1)
		}
	})
}
