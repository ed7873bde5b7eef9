package sqlite

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// goTokenWords are words to tokenize both ways: English-like stems with
// every suffix the Porter rules know (and a few they do not), ASCII runs
// with separators, code points from many Unicode blocks among ASCII
// letters (diacritics, scripts without case, punctuation, private use,
// U+FFFE), invalid UTF-8 and overlong tokens.
func goTokenWords(rng *rand.Rand) []string {
	suffixes := []string{"", "s", "es", "ies", "sses", "ss", "ed", "eed", "ing", "y", "ly", "e", "l", "ll", "ize", "ise",
		"ational", "tional", "enci", "anci", "izer", "logi", "bli", "alli", "entli", "eli", "ousli", "ization", "ation",
		"ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "ical", "ness", "icate", "iciti",
		"ful", "ative", "alize", "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
		"sion", "tion", "ou", "ism", "ate", "iti", "ous", "ive", "at", "bl", "iz", "ings", "edly", "ements", "izations"}
	const letters = "aeiouybcdfghjklmnpqrstvwxzsstlle"
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(letters[rng.IntN(len(letters))])
		}
		return b.String()
	}
	var words []string
	for range 20000 {
		w := word(rng.IntN(9)) + suffixes[rng.IntN(len(suffixes))]
		if rng.IntN(5) == 0 {
			w = strings.ToUpper(w[:min(1, len(w))]) + w[min(1, len(w)):]
		}
		words = append(words, w)
	}
	const ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:;'\"()[]{}<>/\\|!?@#$%^&*+=~`\x00\x01\x7f"
	for range 5000 {
		var b strings.Builder
		for range 1 + rng.IntN(40) {
			b.WriteByte(ascii[rng.IntN(len(ascii))])
		}
		words = append(words, b.String())
	}
	blocks := [][2]rune{
		{0x80, 0xFF}, {0x100, 0x24F}, {0x250, 0x2FF}, {0x300, 0x36F}, {0x370, 0x3FF}, {0x400, 0x4FF},
		{0x590, 0x6FF}, {0x900, 0x97F}, {0xE00, 0xE7F}, {0x1E00, 0x1EFF}, {0x2000, 0x206F}, {0x20A0, 0x20CF},
		{0x2100, 0x214F}, {0x2190, 0x21FF}, {0x3000, 0x303F}, {0x3040, 0x30FF}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00},
		{0xE000, 0xE0FF}, {0xFB00, 0xFB4F}, {0xFE00, 0xFE6F}, {0xFF00, 0xFFFF}, {0x1D400, 0x1D7FF}, {0x1F300, 0x1F6FF},
		{0xE0000, 0xE007F}, {0xF0000, 0xF00FF},
	}
	for range 20000 {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			if rng.IntN(2) == 0 {
				b.WriteString(word(rng.IntN(4)))
			}
			bl := blocks[rng.IntN(len(blocks))]
			r := bl[0] + rune(rng.IntN(int(bl[1]-bl[0]+1)))
			if utf8.ValidRune(r) {
				b.WriteRune(r)
			}
		}
		b.WriteString(suffixes[rng.IntN(len(suffixes))])
		words = append(words, b.String())
	}
	words = append(words, "caf\xe9", "\xff\xfeab", "ab\xc3", "\xed\xa0\x80x", "\xc0\xafe", "x\ufffey", "\ufeffBOM",
		strings.Repeat("ab", 40), strings.Repeat("Xy", 32)+"ing", strings.Repeat("z", maxTokenBytes+5), "é"+strings.Repeat("e", 70))
	return words
}

// The tokens made in Go are FTS5's own, word by word; every ASCII word is
// made in Go, and nearly every other one.
func TestGoTokensMatchFTS5(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	words := goTokenWords(rand.New(rand.NewPCG(7, 11)))
	var tk tokenizer
	defer tk.close()
	want, err := tk.tokenize(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	for _, pass := range []string{"cold", "warm"} {
		got, err := tk.goTokens(ctx, words)
		if err != nil {
			t.Fatal(err)
		}
		inGo, other := 0, 0
		for i, w := range words {
			ascii := utf8.ValidString(w) && len(w) <= maxTokenBytes && strings.IndexFunc(w, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
			if !ascii {
				other++
			}
			if got[i] == nil {
				if ascii {
					t.Errorf("%s: ASCII word %q left to FTS5", pass, w)
				}
				continue
			}
			if !ascii {
				inGo++
			}
			if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
				t.Errorf("%s: %q: Go %q, FTS5 %q", pass, w, got[i], want[i])
			}
		}
		if inGo < other*9/10 {
			t.Errorf("%s: %d of %d words above ASCII made in Go", pass, inGo, other)
		}
	}
	tk.classes.mu.Lock()
	kinds := map[uint8]int{}
	for _, cl := range tk.classes.cur {
		kinds[cl.kind]++
	}
	tk.classes.mu.Unlock()
	for _, k := range []uint8{runeSeparator, runeToken, runeMark} {
		if kinds[k] == 0 {
			t.Errorf("no code point of kind %d among %v", k, kinds)
		}
	}
	t.Logf("code points by kind: %v", kinds)
}

// Stems of fts5_porter.c worked by hand, its quirks included: y is a
// vowel anywhere but first (*v*), a step whose suffix matches but whose
// condition fails ends there, and tokens under 3 or over 64 bytes stay.
func TestPorterStem(t *testing.T) {
	for in, want := range map[string]string{
		"caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
		"feed": "feed", "agreed": "agre", "plastered": "plaster", "bled": "bled", "motoring": "motor",
		"sing": "sing", "conflated": "conflat", "troubled": "troubl", "sized": "size", "hopping": "hop",
		"tanned": "tan", "falling": "fall", "hissing": "hiss", "fizzed": "fizz", "failing": "fail",
		"filing": "file", "happy": "happi", "sky": "sky", "relational": "relat", "conditional": "condit",
		"rational": "ration", "valenci": "valenc", "digitizer": "digit", "conformabli": "conform",
		"radicalli": "radic", "differentli": "differ", "vileli": "vile", "analogousli": "analog",
		"vietnamization": "vietnam", "predication": "predic", "operator": "oper", "feudalism": "feudal",
		"decisiveness": "decis", "hopefulness": "hope", "callousness": "callous", "formaliti": "formal",
		"sensitiviti": "sensit", "sensibiliti": "sensibl", "triplicate": "triplic", "formative": "form",
		"formalize": "formal", "electriciti": "electr", "electrical": "electr", "hopeful": "hope",
		"goodness": "good", "revival": "reviv", "allowance": "allow", "inference": "infer", "airliner": "airlin",
		"gyroscopic": "gyroscop", "adjustable": "adjust", "defensible": "defens", "irritant": "irrit",
		"replacement": "replac", "adjustment": "adjust", "dependent": "depend", "adoption": "adopt",
		"homologou": "homolog", "communism": "commun", "activate": "activ", "angulariti": "angular",
		"homologous": "homolog", "effective": "effect", "bowdlerize": "bowdler", "probate": "probat",
		"rate": "rate", "cease": "ceas", "controll": "control", "roll": "roll", "ab": "ab", "eed": "e",
		"aed": "a", "yes": "ye", "syzygy": "syzygi", "windows": "window", "running": "run",
	} {
		if got := string(porterStem([]byte(in))); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("a", 61) + "ing"
	if got := string(porterStem([]byte(long))); got != strings.Repeat("a", 61) {
		t.Errorf("64 bytes: %q", got)
	}
	if got := string(porterStem([]byte(long + "s"))); got != long+"s" {
		t.Errorf("65 bytes: %q", got)
	}
}
