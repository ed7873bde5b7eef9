package rules

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The keyword prefilter never changes what the regexps find: on texts
// with and without their words, in any case, ASCII or not.
func TestKeywordsFindWhatTheirRegexpsFind(t *testing.T) {
	texts := []string{
		"", "Hello team, the build is green.", "Could you REVIEW the patch by Friday?", "PLEASE sign-off before EOD",
		"We need a DECISION on the priority of this.", "FYI: no action needed, this is the newsletter.",
		"Due tomorrow: the approval of the budget.", "maybe by the 3rd", "standby until the end of the week",
		"Pleaſe take a look", "Approval needed — décision by Monday", "The notice period is 30 days.",
		"signoff, sign off, sign-off and SIGN OFF", "byte by byte until 12th", strings.Repeat("nothing here ", 50),
		"A decision is needed.", "Approval pending.",
	}
	// Every alternative each regexp names, alone in a sentence, in upper
	// case too.
	for _, k := range []keywords{requestRE, decisionRE, fyiRE, deadlineRE} {
		group := k.re.String()
		group = group[strings.Index(group, `\b(`)+3:]
		group = group[:strings.Index(group, ")")]
		for _, alt := range strings.Split(group, "|") {
			for _, v := range []string{strings.ReplaceAll(alt, "[- ]", "-"), strings.ReplaceAll(alt, "[- ]", " ")} {
				texts = append(texts, "We said "+v+" monday here.", strings.ToUpper(v)+" tomorrow")
			}
		}
	}
	for _, k := range []keywords{requestRE, deadlineRE, decisionRE, fyiRE} {
		for _, s := range texts {
			if got, want := k.FindString(s), k.re.FindString(s); got != want {
				t.Errorf("%s on %q: %q, the regexp alone %q", k.re, s, got, want)
			}
			if got, want := k.MatchString(s), k.re.MatchString(s); got != want {
				t.Errorf("%s matches %q: %v, the regexp alone %v", k.re, s, got, want)
			}
			for _, n := range []int{-1, 0, 1, 2} {
				if got, want := k.FindAllString(s, n), k.re.FindAllString(s, n); !slices.Equal(got, want) {
					t.Errorf("%s finds (n %d) %q in %q, the regexp alone %q", k.re, n, got, s, want)
				}
			}
		}
	}
}

// The same on random texts made of the regexps' words, parts of them,
// other words, digits, spaces, punctuation and non-ASCII letters (those
// that fold to ASCII ones too), in random case: where the
// words start, end and touch one another is where an anchored search
// could differ from a scan.
func TestKeywordsFindWhatTheirRegexpsFindOnRandomTexts(t *testing.T) {
	pieces := []string{"by", "before", "until", "due", "the", "monday", "Friday", "tomorrow", "tonight", "end of", "the day", "week", "month",
		"eod", "3", "12", "1st", "22nd", "3rd", "4th", "could you", "can you", "would", "you", "please", "review", "sign", "off", "sign-off",
		"sign off", "approve", "approval", "approv", "take a look", "let me know", "decide", "decision", "need your", "disagree", "priority",
		"fyi", "no action needed", "for your information", "newsletter", "notice", "standby", "maybe", "due_", "x", "_", "9",
		" ", " ", " ", "  ", "\n", "\t", ".", ",", "-", ":", "?", "(", ")", "'",
		"é", "—", "\u00a0", "İ", "ß", "Ω", "\u212a", "\u017f", "pleaſe", "\u212aeep", "日本"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			p := pieces[r.IntN(len(pieces))]
			switch r.IntN(3) {
			case 0:
				p = strings.ToUpper(p)
			case 1:
				if p != "" {
					p = strings.ToUpper(p[:1]) + p[1:]
				}
			}
			b.WriteString(p)
		}
		s := b.String()
		for _, k := range []keywords{requestRE, deadlineRE, decisionRE, fyiRE} {
			if got, want := k.FindAllString(s, -1), k.re.FindAllString(s, -1); !slices.Equal(got, want) {
				t.Fatalf("%s finds %q in %q, the regexp alone %q", k.re, got, s, want)
			}
			if got, want := k.FindString(s), k.re.FindString(s); got != want {
				t.Fatalf("%s on %q: %q, the regexp alone %q", k.re, s, got, want)
			}
		}
	}
}

// BenchmarkRouteKeywords: the four keyword regexps over a Jira-like comment
// thread (non-ASCII punctuation in it), as routing and the summary run them.
func BenchmarkRouteKeywords(b *testing.B) {
	text := strings.Repeat("Comment by cbarber (2015-11-18T00:49:48.000+0000): Have you tried building a module — with {{ti build}}? "+
		"I’m running {{ant}} from the android folder and it fails by default; see the log below.\n", 30)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		for _, k := range []keywords{requestRE, deadlineRE, decisionRE, fyiRE} {
			k.FindString(text)
		}
	}
}
