package links_test

import (
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/indexers/links"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"HTTPS://Example.COM:443/Path?a=1#frag":                       "https://example.com/Path?a=1",
		"http://example.com:80":                                       "http://example.com/",
		"http://example.com:8080/x":                                   "http://example.com:8080/x",
		"https://x.test/p?utm_source=mail&id=7&utm_medium=e&fbclid=z": "https://x.test/p?id=7",
		"https://x.test/p?gclid=1":                                    "https://x.test/p",
		"https://EXAMPLE.com./a":                                      "https://example.com/a",
		"http://[::1]:80/a":                                           "http://[::1]/a",
		"https://x.test/a?b=2&a=1":                                    "https://x.test/a?b=2&a=1",
	} {
		got, ok := links.Normalize(in)
		if !ok || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{
		"mailto:ann@x.test", "cid:part1@x", "data:text/html,<b>x</b>", "javascript:alert(1)", "file:///etc/passwd",
		"ftp://x.test/f", "", "https://", "https://user:pw@x.test/", "//x.test/a", "https://" + strings.Repeat("a", 5000) + ".test",
	} {
		if got, ok := links.Normalize(bad); ok {
			t.Errorf("Normalize(%q) = %q, want rejected", bad, got)
		}
	}
}

func TestFromText(t *testing.T) {
	t.Parallel()
	text := "See the runbook (https://wiki.acme.test/ops/runbook) and https://WIKI.acme.test/ops/runbook#deploy.\n" +
		"Dashboard: https://grafana.acme.test/d/abc?orgId=1&utm_campaign=x, mail me at mailto:ann@acme.test.\n" +
		"Wikipedia: https://en.wikipedia.org/wiki/Go_(programming_language)!"
	got := links.FromText(text)
	want := []string{"https://wiki.acme.test/ops/runbook", "https://grafana.acme.test/d/abc?orgId=1", "https://en.wikipedia.org/wiki/Go_(programming_language)"}
	if len(got) != len(want) {
		t.Fatalf("links %+v", got)
	}
	for i, l := range got {
		if l.URL != want[i] {
			t.Errorf("link %d = %q, want %q", i, l.URL, want[i])
		}
	}
	if !strings.Contains(got[0].Context, "See the runbook") || !strings.Contains(got[1].Context, "Dashboard:") {
		t.Fatalf("contexts: %q / %q", got[0].Context, got[1].Context)
	}
}

func TestContextIsBounded(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("é", 1000) + " https://x.test/a " + strings.Repeat("ü", 1000)
	got := links.FromText(text)
	if len(got) != 1 {
		t.Fatal(got)
	}
	if n := len([]rune(got[0].Context)); n > 2*links.ContextChars+len("https://x.test/a")+2 {
		t.Fatalf("context of %d characters", n)
	}
}

func TestFromHTML(t *testing.T) {
	t.Parallel()
	doc := `<html><head><style>a{}</style><script>var u="https://evil.test/x"</script></head><body>
<p>Please review <a href="https://git.acme.test/pr/7?utm_source=mail">PR 7</a> before Friday.</p>
<a href="mailto:bob@acme.test">Bob</a> <a href="javascript:void(0)">x</a> <a href="#top">top</a>
<img src="https://cdn.acme.test/logo.png"> <a href="cid:image001.png@01D">inline</a>
<a href="https://git.acme.test/pr/7#files">again</a></body></html>`
	got := links.FromHTML(doc)
	if len(got) != 2 || got[0].URL != "https://git.acme.test/pr/7" || got[1].URL != "https://cdn.acme.test/logo.png" {
		t.Fatalf("links %+v", got)
	}
	if !strings.Contains(got[0].Context, "Please review") || !strings.Contains(got[0].Context, "before Friday") || strings.Contains(got[0].Context, "evil") {
		t.Fatalf("context %q", got[0].Context)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 5000 {
		b.WriteString("https://x.test/")
		b.WriteString(strings.Repeat("a", i%7+1))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(" ")
		b.WriteString(strings.Repeat("z", i%3))
		b.WriteString(string(rune('0'+i%10)) + "\n")
	}
	if got := links.FromText(b.String()); len(got) > links.MaxLinks {
		t.Fatalf("%d links", len(got))
	}
}

func TestHostileURLsAreCheap(t *testing.T) {
	t.Parallel()
	text := "see http://x.test/" + strings.Repeat(")", 2<<20) + " and https://ok.test/a."
	// Quadratic trimming would not finish within go test's timeout.
	got := links.FromText(text)
	if len(got) != 1 || got[0].URL != "https://ok.test/a" {
		t.Fatalf("%+v", got)
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{"https://x.test/a?b=1#c", "<a href='http://x.test'>x</a>", "http://[::1", "https://%zz", "<a href=", "http://x.test/((((", "https://é.test/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range append(links.FromText(s), links.FromHTML(s)...) {
			again, ok := links.Normalize(l.URL)
			if !ok || again != l.URL {
				t.Fatalf("%q is not a fixed point of Normalize (%q, %v)", l.URL, again, ok)
			}
			if !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") {
				t.Fatalf("non-http link %q", l.URL)
			}
		}
	})
}
