package kb_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb"
)

func TestParseRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"user:john", "user:john"},
		{"User:John", "user:john"},
		{"  USER : John  ", "user:john"},
		{"user::john", "user:john"},
		{"jira::JERV-123", "jira:jerv-123"},
		{"order:order_530798957", "order:530798957"},
		{"jira:JIRA-7", "jira:jira-7"},
		{"user:john.doe@example.com", "user:john.doe@example.com"},
		{"topic:Release   Train  Q3", "topic:release_train_q3"},
		{"file:src/Service.kt", "file:src/service.kt"},
		{"person:O'Brien (ops)", "person:o_brien__ops_"},
		{"my type:x", "my_type:x"},
		{"topic:Café Crème", "topic:café_crème"},
		{"url:https://x.test/a?b=c", "url:https://x.test/a_b_c"},
	} {
		got, err := kb.ParseRef(tc.in)
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseRef(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "john", ":john", "user:", "user:!!!", "!!!:???", "::", "user:" + strings.Repeat("x", kb.MaxRefLen)} {
		if got, err := kb.ParseRef(bad); !errors.Is(err, kb.ErrBadRef) {
			t.Errorf("ParseRef(%q) = %q, %v; want ErrBadRef", bad, got, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"user:john", "a::b", "order:order_1", "::", "x:\x00\xff", "ü:ß"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := kb.ParseRef(s)
		if err != nil {
			return
		}
		out := r.String()
		if r.Namespace == "" || r.Value == "" || len(out) > kb.MaxRefLen {
			t.Fatalf("ParseRef(%q) = %q", s, out)
		}
		again, err := kb.ParseRef(out)
		if err != nil || again != r {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", s, out, again, err)
		}
	})
}

// A link ref keeps a URL whole up to 400 bytes; a longer one keeps a prefix
// and a hash, so it stays a valid ref and two long URLs stay two nodes.
func TestBoundedLinkRef(t *testing.T) {
	t.Parallel()
	if got := kb.BoundedRef("link", "https://x.test/a"); got != "link:https://x.test/a" {
		t.Fatalf("short: %q", got)
	}
	long := "https://idp.example.test/adfs/ls/?request=" + strings.Repeat("q", 800)
	a, b := kb.BoundedRef("link", long), kb.BoundedRef("link", long+"x")
	if a == b || len(a) > 450 || !strings.HasPrefix(a, "link:https://idp.example.test/adfs/") {
		t.Fatalf("long: %q %q", a, b)
	}
	if _, err := kb.ParseRef(a); err != nil {
		t.Fatal(err)
	}
}
