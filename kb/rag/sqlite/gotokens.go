package sqlite

import (
	"context"
	"maps"
	"sync"
	"unicode/utf8"
)

// FTS5's tokenizer (tokenizerSpec: porter over unicode61 with
// remove_diacritics 2) done in Go, so that a word's tokens need no trip
// through SQLite: writing the words into an FTS5 table and reading its
// vocabulary back cost about 120 µs a chunk, three quarters of the
// in-memory index's load and a fifth of a live index's write.
//
// unicode61 decides code point by code point: ASCII letters and digits
// are token characters (folded to lower case), other ASCII is a separator,
// and a code point above ASCII starts a token, continues one (a diacritic
// only continues one) or separates, by Unicode tables compiled into
// SQLite, and folds to at most one code point. Those tables are not
// copied here: each code point above ASCII is asked of FTS5 itself the
// first time a text holds it (runeClasses), and a text holding one FTS5's
// answers cannot settle, or that is not valid UTF-8, or whose token is
// longer than FTS5 keeps, is tokenized by FTS5 word by word as before. The Porter
// stemmer (fts5_porter.c's rules, quirks included) runs on each token's
// bytes. TestGoTokensMatchFTS5 compares the two on generated words.

// The kinds of code point above ASCII, as FTS5's unicode61 treats them.
const (
	runeSeparator = iota + 1
	runeToken     // starts or continues a token
	runeMark      // continues a token only (a diacritic)
	runeOdd       // FTS5's answers do not settle it: its words go to FTS5
)

type runeClass struct {
	kind uint8
	fold string // what the code point becomes in a token (runeToken, runeMark)
}

// runeClasses are the code points asked of FTS5 so far. The map is
// replaced, never changed, so that words are tokenized without a lock.
type runeClasses struct {
	mu  sync.Mutex // held while a map is replaced
	cur map[rune]runeClass
}

// maxTokenBytes is the longest token FTS5 stores whole
// (FTS5_MAX_TOKEN_SIZE); a word with a longer one goes to FTS5.
const maxTokenBytes = 32768

// goWordTokens appends the tokens of word (one word or a whole text) to
// dst. ok is false when Go cannot say: the code points classes does not hold are passed to missing (ask
// FTS5, then try again), and a word holding an odd one, invalid UTF-8 or
// an overlong token goes to FTS5 whole.
func goWordTokens(dst []string, word string, classes map[rune]runeClass, missing func(rune)) (_ []string, ok bool) {
	if !utf8.ValidString(word) {
		return dst, false
	}
	ok = true
	var fixed [64]byte
	tok := fixed[:0]
	in := false // within a token
	emit := func() {
		if len(tok) > maxTokenBytes {
			ok = false
		}
		dst = append(dst, string(porterStem(tok)))
		tok, in = tok[:0], false
	}
	for i := 0; i < len(word); {
		c := word[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				tok, in = append(tok, c), true
			case 'A' <= c && c <= 'Z':
				tok, in = append(tok, c+'a'-'A'), true
			case in:
				emit()
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(word[i:])
		i += n
		cl, known := classes[r]
		switch {
		case !known:
			missing(r)
			ok = false
		case cl.kind == runeOdd:
			return dst, false
		case cl.kind == runeToken || cl.kind == runeMark && in:
			tok, in = append(tok, cl.fold...), true
		case in:
			emit()
		}
	}
	if in {
		emit()
	}
	return dst, ok
}

// classify asks FTS5 how it treats each of runes, and adds the answers to
// the classes Go tokenizes with. "q" + r + "q" is one token when r
// continues a token (its fold between the q's: no Porter rule ends in q)
// and two when it separates; "." + r + "q" tells a code point that also
// starts a token (the token fold + "q") from a diacritic ("q"). A
// diacritic that folds to nothing ("qq", then "q") could also be a token
// character that does: "." + r + "." making no token at all says they
// tokenize alike (an empty token is not kept), and it is taken as a
// diacritic.
func (t *tokenizer) classify(ctx context.Context, runes []rune) error {
	words := make([]string, 0, 3*len(runes))
	for _, r := range runes {
		words = append(words, "q"+string(r)+"q", "."+string(r)+"q", "."+string(r)+".")
	}
	toks, err := t.tokenize(ctx, words)
	if err != nil {
		return err
	}
	t.classes.mu.Lock()
	defer t.classes.mu.Unlock()
	next := maps.Clone(t.classes.cur)
	if next == nil {
		next = map[rune]runeClass{}
	}
	for i, r := range runes {
		inner, start, alone := toks[3*i], toks[3*i+1], toks[3*i+2]
		cl := runeClass{kind: runeOdd}
		switch {
		case len(inner) == 2 && inner[0] == "q" && inner[1] == "q" && len(start) == 1 && start[0] == "q":
			cl.kind = runeSeparator
		case len(inner) == 1 && len(inner[0]) >= 2 && inner[0][0] == 'q' && inner[0][len(inner[0])-1] == 'q' && len(start) == 1:
			fold := inner[0][1 : len(inner[0])-1]
			switch {
			case fold != "" && start[0] == fold+"q":
				cl = runeClass{kind: runeToken, fold: fold}
			case start[0] == "q" && (fold != "" || len(alone) == 0):
				cl = runeClass{kind: runeMark, fold: fold}
			}
		}
		next[r] = cl
	}
	t.classes.cur = next
	return nil
}

// goTokens returns each word's tokens, or nil for a word Go cannot
// tokenize (tokens: FTS5 does those). Code points not met before are
// asked of FTS5 first, all of the words' at once.
func (t *tokenizer) goTokens(ctx context.Context, words []string) ([][]string, error) {
	out := make([][]string, len(words))
	var retry []int
	var missing []rune
	seen := map[rune]bool{}
	note := func(r rune) {
		if !seen[r] {
			seen[r] = true
			missing = append(missing, r)
		}
	}
	t.classes.mu.Lock()
	classes := t.classes.cur
	t.classes.mu.Unlock()
	for i, w := range words {
		toks, ok := goWordTokens(nil, w, classes, note)
		switch {
		case ok:
			out[i] = nonNilTokens(toks)
		case len(missing) > 0:
			retry = append(retry, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if err := t.classify(ctx, missing); err != nil {
		return nil, err
	}
	t.classes.mu.Lock()
	classes = t.classes.cur
	t.classes.mu.Unlock()
	for _, i := range retry {
		if toks, ok := goWordTokens(nil, words[i], classes, func(rune) {}); ok {
			out[i] = nonNilTokens(toks)
		}
	}
	return out, nil
}

// nonNilTokens: a word with no tokens (punctuation) is known to have
// none, which nil would not tell.
func nonNilTokens(toks []string) []string {
	if toks == nil {
		return []string{}
	}
	return toks
}

// porterStem stems one token as fts5_porter.c does: tokens under 3 or
// over 64 bytes are kept as they are. b is changed in place (the stem
// fits where the token was, with room for one more byte).
func porterStem(b []byte) []byte {
	if len(b) < 3 || len(b) > 64 {
		return b
	}
	b = porterStep1A(b)
	var more bool
	if b, more = porterApply(b, porterStep1B); more {
		if b, more = porterApply(b, porterStep1B2); !more {
			n := len(b)
			c := b[n-1]
			switch {
			case !porterVowel(c, false) && c != 'l' && c != 's' && c != 'z' && n >= 2 && c == b[n-2]:
				b = b[:n-1]
			case porterMEq1(b) && porterOStar(b):
				b = append(b, 'e')
			}
		}
	}
	if n := len(b); b[n-1] == 'y' && porterHasVowel(b[:n-1]) { // step 1c
		b[n-1] = 'i'
	}
	b, _ = porterApply(b, porterStep2)
	b, _ = porterApply(b, porterStep3)
	b, _ = porterApply(b, porterStep4)
	if n := len(b); b[n-1] == 'e' { // step 5a
		if stem := b[:n-1]; porterMGt1(stem) || porterMEq1(stem) && !porterOStar(stem) {
			b = stem
		}
	}
	if n := len(b); n > 1 && b[n-1] == 'l' && b[n-2] == 'l' && porterMGt1(b[:n-1]) { // step 5b
		b = b[:n-1]
	}
	return b
}

func porterStep1A(b []byte) []byte {
	n := len(b)
	if b[n-1] != 's' {
		return b
	}
	switch {
	case b[n-2] == 'e' && (n > 4 && b[n-4] == 's' && b[n-3] == 's' || n > 3 && b[n-3] == 'i'):
		return b[:n-2] // sses, ies
	case b[n-2] != 's':
		return b[:n-1]
	}
	return b
}

// porterRule replaces suffix by repl when the stem before it passes
// cond (nil: always); more says the stemmer goes on to step 1b's second
// part.
type porterRule struct {
	suffix, repl string
	cond         func(stem []byte) bool
	more         bool
}

// porterStep is a step's rules by the next-to-last byte of their suffix
// (every suffix has two bytes or more), each list in the step's order: the
// switch fts5_porter.c's generated steps make.
type porterStep [256][]porterRule

func newPorterStep(rules []porterRule) *porterStep {
	var s porterStep
	for _, r := range rules {
		c := r.suffix[len(r.suffix)-2]
		s[c] = append(s[c], r)
	}
	return &s
}

// porterApply applies the first of the step's rules whose suffix ends b
// after at least one byte; a rule whose suffix matches but whose
// condition fails ends the step as well. It reports the applied rule's
// more.
func porterApply(b []byte, step *porterStep) ([]byte, bool) {
	if len(b) < 2 {
		return b, false
	}
	for _, r := range step[b[len(b)-2]] {
		n := len(b) - len(r.suffix)
		if n < 1 || string(b[n:]) != r.suffix {
			continue
		}
		if r.cond != nil && !r.cond(b[:n]) {
			return b, false
		}
		return append(b[:n], r.repl...), r.more
	}
	return b, false
}

var (
	porterStep1B = newPorterStep([]porterRule{
		{"eed", "ee", porterMGt0, false},
		{"ed", "", porterHasVowel, true},
		{"ing", "", porterHasVowel, true},
	})
	porterStep1B2 = newPorterStep([]porterRule{
		{"at", "ate", nil, true},
		{"bl", "ble", nil, true},
		{"iz", "ize", nil, true},
	})
	porterStep2 = newPorterStep([]porterRule{
		{"ational", "ate", porterMGt0, false},
		{"tional", "tion", porterMGt0, false},
		{"enci", "ence", porterMGt0, false},
		{"anci", "ance", porterMGt0, false},
		{"izer", "ize", porterMGt0, false},
		{"logi", "log", porterMGt0, false},
		{"bli", "ble", porterMGt0, false},
		{"alli", "al", porterMGt0, false},
		{"entli", "ent", porterMGt0, false},
		{"eli", "e", porterMGt0, false},
		{"ousli", "ous", porterMGt0, false},
		{"ization", "ize", porterMGt0, false},
		{"ation", "ate", porterMGt0, false},
		{"ator", "ate", porterMGt0, false},
		{"alism", "al", porterMGt0, false},
		{"iveness", "ive", porterMGt0, false},
		{"fulness", "ful", porterMGt0, false},
		{"ousness", "ous", porterMGt0, false},
		{"aliti", "al", porterMGt0, false},
		{"iviti", "ive", porterMGt0, false},
		{"biliti", "ble", porterMGt0, false},
	})
	porterStep3 = newPorterStep([]porterRule{
		{"ical", "ic", porterMGt0, false},
		{"ness", "", porterMGt0, false},
		{"icate", "ic", porterMGt0, false},
		{"iciti", "ic", porterMGt0, false},
		{"ful", "", porterMGt0, false},
		{"ative", "", porterMGt0, false},
		{"alize", "al", porterMGt0, false},
	})
	porterStep4 = newPorterStep([]porterRule{
		{"al", "", porterMGt1, false},
		{"ance", "", porterMGt1, false},
		{"ence", "", porterMGt1, false},
		{"er", "", porterMGt1, false},
		{"ic", "", porterMGt1, false},
		{"able", "", porterMGt1, false},
		{"ible", "", porterMGt1, false},
		{"ant", "", porterMGt1, false},
		{"ement", "", porterMGt1, false},
		{"ment", "", porterMGt1, false},
		{"ent", "", porterMGt1, false},
		{"ion", "", porterMGt1SorT, false},
		{"ou", "", porterMGt1, false},
		{"ism", "", porterMGt1, false},
		{"ate", "", porterMGt1, false},
		{"iti", "", porterMGt1, false},
		{"ous", "", porterMGt1, false},
		{"ive", "", porterMGt1, false},
		{"ize", "", porterMGt1, false},
	})
)

// porterVowel: a, e, i, o, u, and y where y counts.
func porterVowel(c byte, y bool) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || y && c == 'y'
}

// porterVC returns the length of stem's first vowels-then-consonants run
// (0: none), y counting as a vowel after a consonant; prevCons says
// whether the byte before stem was one.
func porterVC(stem []byte, prevCons bool) int {
	cons := prevCons
	i := 0
	for ; i < len(stem); i++ {
		if cons = !porterVowel(stem[i], cons); !cons {
			break
		}
	}
	for i++; i < len(stem); i++ {
		if cons = !porterVowel(stem[i], cons); cons {
			return i + 1
		}
	}
	return 0
}

func porterMGt0(stem []byte) bool { return porterVC(stem, false) > 0 }

func porterMGt1(stem []byte) bool {
	n := porterVC(stem, false)
	return n > 0 && porterVC(stem[n:], true) > 0
}

func porterMEq1(stem []byte) bool {
	n := porterVC(stem, false)
	return n > 0 && porterVC(stem[n:], true) == 0
}

// porterOStar: stem ends consonant, vowel, consonant, the last not w, x
// or y.
func porterOStar(stem []byte) bool {
	n := len(stem)
	if n == 0 || stem[n-1] == 'w' || stem[n-1] == 'x' || stem[n-1] == 'y' {
		return false
	}
	var mask uint
	cons := false
	for _, c := range stem {
		cons = !porterVowel(c, cons)
		mask <<= 1
		if cons {
			mask |= 1
		}
	}
	return mask&7 == 5
}

func porterMGt1SorT(stem []byte) bool {
	c := stem[len(stem)-1]
	return (c == 's' || c == 't') && porterMGt1(stem)
}

// porterHasVowel: a vowel in stem, y counting after its first byte.
func porterHasVowel(stem []byte) bool {
	for i, c := range stem {
		if porterVowel(c, i > 0) {
			return true
		}
	}
	return false
}
