package kb

import "testing"

// A part normalizePart returns as it is must be one its rewrite would
// leave as it is too.
func FuzzCanonicalPartIsKept(f *testing.F) {
	for _, s := range []string{"user", "john.doe@acme.test", "Jira", "a b", "x:y", "order_1", "ü", "", " a", "a-b+c#d/e", "İ", "\x00"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, namespace bool) {
		rewritten := rewritePart(s, namespace)
		if canonicalPart(s, namespace) && rewritten != s {
			t.Fatalf("canonicalPart(%q, %v) but the rewrite gives %q", s, namespace, rewritten)
		}
		if got := normalizePart(s, namespace); got != rewritten {
			t.Fatalf("normalizePart(%q, %v) = %q, the rewrite %q", s, namespace, got, rewritten)
		}
	})
}
