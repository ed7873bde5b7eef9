package kb_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
)

func rels(found []kb.Found) []string {
	var out []string
	for _, f := range found {
		out = append(out, f.From+"|"+f.Type+"|"+f.To)
	}
	return out
}

func TestParseRelations(t *testing.T) {
	t.Parallel()
	main, _ := kb.ParseRef("jira:TASK-123")
	for _, tc := range []struct {
		name     string
		text     string
		want     []string
		mentions []string
	}{
		{"pipe", "jira:TASK-123|MENTIONS|user:john", []string{"jira:task-123|mentions|user:john"}, nil},
		{"arrow", "file:Service.kt->MODIFIED_BY->commit:abc123", []string{"file:service.kt|modified_by|commit:abc123"}, nil},
		{"arrow spaced", "file:a.go -> IMPORTS -> file:b.go", []string{"file:a.go|imports|file:b.go"}, nil},
		{"bracket", "class:UserService -[CALLS]-> method:authenticate", []string{"class:userservice|calls|method:authenticate"}, nil},
		{"block", "relationships: [\n  \"jira:TASK-123|MENTIONS|user:john\",\n  \"commit:abc123|FIXES|jira:TASK-123\"\n]",
			[]string{"jira:task-123|mentions|user:john", "commit:abc123|fixes|jira:task-123"}, nil},
		{"block on one line", `relationships: ["a:1|X|b:2", "c:3->Y->d:4"]`, []string{"c:3|y|d:4", "a:1|x|b:2"}, nil},
		{"short-hand", "TASK-123|MENTIONS|user:john\nfile:Service.kt|RELATED_TO|TASK-123",
			[]string{"jira:task-123|mentions|user:john", "file:service.kt|related_to|jira:task-123"}, nil},
		{"table row is no relation", "| Name | Role | Team |\nAnn | lead | ops", nil, nil},
		{"log and table lines are no relations", "|2016-04-20T11:22:33|INFO|fs.js:12|\n| C:\\temp | COPY | D:\\backup |", nil, nil},
		{"unknown short-hand", "OTHER-9|MENTIONS|user:john", nil, []string{"user:john"}},
		{"mentions", "Ask person:ann about jira:OPS-7 (see https://x.test/a, mailto:b@x.test, Re: hello at 10:30).",
			nil, []string{"person:ann", "jira:ops-7"}},
		// Single-letter namespaces are not mentions (drive letters, "a:1" in prose).
		{"malformed", "a:1||b:2\n|X|\n->X->\n-[X]->\na:1|X y|b:2\nab:1 -[ ]-> cd:2", nil, []string{"ab:1", "cd:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, mentions := kb.ParseRelations(tc.text, main)
			if got := rels(found); !slices.Equal(got, tc.want) {
				t.Errorf("relations %v, want %v", got, tc.want)
			}
			var ms []string
			for _, m := range mentions {
				ms = append(ms, m.Ref.String())
			}
			if !slices.Equal(ms, tc.mentions) {
				t.Errorf("mentions %v, want %v", ms, tc.mentions)
			}
		})
	}
}

func TestParseRelationsOffsetsAreLineStarts(t *testing.T) {
	t.Parallel()
	text := "intro line\nsecond: a:1|X|b:2\nthird mentions person:zoe\n"
	found, mentions := kb.ParseRelations(text, kb.Ref{})
	if len(found) != 1 || text[found[0].Offset:found[0].Offset+7] != "second:" {
		t.Fatalf("relation offset %+v", found)
	}
	if len(mentions) != 1 || !strings.HasPrefix(text[mentions[0].Offset:], "third") {
		t.Fatalf("mention offset %+v", mentions)
	}
}

func TestParseRelationsBoundsWork(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 30_000 {
		fmt.Fprintf(&b, "n:%d|LINK|n:%d\n", i, i+1)
	}
	b.WriteString(strings.Repeat("a:1|X|b:2 ", 100_000)) // one huge line
	found, mentions := kb.ParseRelations(b.String(), kb.Ref{})
	if len(found)+len(mentions) > 10_000 {
		t.Fatalf("%d results", len(found)+len(mentions))
	}
}

func FuzzParseRelations(f *testing.F) {
	for _, s := range []string{
		"jira:TASK-123|MENTIONS|user:john", "a->B->c:d", "x:1 -[E]-> y:2", `relationships: ["a:1|X|b:2"]`,
		"TASK-123|MENTIONS|user:john", "|||", "->->->", "-[]->", "person:ann", "\x00:\xff|X|:",
	} {
		f.Add(s)
	}
	main, _ := kb.ParseRef("jira:TASK-123")
	f.Fuzz(func(t *testing.T, s string) {
		found, mentions := kb.ParseRelations(s, main)
		for _, r := range found {
			for _, end := range []string{r.From, r.To} {
				if ref, err := kb.ParseRef(end); err != nil || ref.String() != end {
					t.Fatalf("endpoint %q is not canonical (%v) in %q", end, err, s)
				}
			}
			if r.Type == "" || r.Type != strings.ToLower(r.Type) || r.Offset < 0 || r.Offset > len(s) {
				t.Fatalf("bad relation %+v", r)
			}
		}
		for _, m := range mentions {
			if m.Ref.Namespace == "" || m.Ref.Value == "" {
				t.Fatalf("empty mention from %q", s)
			}
		}
	})
}

func TestEdgeType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"Gantt: start-finish", "gantt_start_finish"},
		{"Duplicate", "duplicate"},
		{"is blocked by", "is_blocked_by"},
		{"  Problem/Incident ", "problem_incident"},
		{"Dépend de", "depend_de"},
		{"1:1 mapping", "rel_1_1_mapping"},
		{"Связан с", "rel_9a2e5a4e"},
		{"Связан с Jira", "jira_dd3e758b"},
		{strings.Repeat("very long relation name ", 4), "very_long_relation_name_very_long_relation_name_very_lo_1a837799"},
	} {
		got, err := kb.EdgeType(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("EdgeType(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if len(got) > 64 || !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(got) {
			t.Errorf("EdgeType(%q) = %q is not a valid edge type", tc.in, got)
		}
	}
	for _, bad := range []string{"", "  ", "???", "-->"} {
		if got, err := kb.EdgeType(bad); !errors.Is(err, graph.ErrInvalid) {
			t.Errorf("EdgeType(%q) = %q, %v; want graph.ErrInvalid", bad, got, err)
		}
	}
}

// BenchmarkParseRelations: a Jira-like comment thread (a colon on every
// line, a few mentions and relationship lines).
func BenchmarkParseRelations(b *testing.B) {
	text := strings.Repeat("Comment by cbarber (2015-11-18T00:49:48.000+0000): Have you tried building it with {{ti build}}? See jira:TIMOB-20011 and https://github.com/appcelerator/titanium_mobile/pull/7472.\n"+
		"Expected Result: the build fails — TIMOB-20012 -> blocks -> TIMOB-20013\n", 30)
	main, _ := kb.ParseRef("jira:timob-20000")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		kb.ParseRelations(text, main)
	}
}
