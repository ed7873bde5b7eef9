package rules

import (
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
			if got, want := len(k.FindAllString(s, -1)), len(k.re.FindAllString(s, -1)); got != want {
				t.Errorf("%s finds %d in %q, the regexp alone %d", k.re, got, s, want)
			}
		}
	}
}
