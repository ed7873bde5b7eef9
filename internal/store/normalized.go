package store

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodeNormalized decodes a document's normalized JSON, as the backends
// store it (json.Marshal of a Normalized), into n; the result is what
// json.Unmarshal gives, errors included.
//
// The title, the body, the warnings and the metadata (into the maps,
// lists, strings, float64s and booleans json.Unmarshal makes) are read
// here, a string without escapes taken as a substring of data; only the
// links go through encoding/json. Decoding whole documents there was 0.8 of the
// pipeline's 14.3 CPU-s on the dev Jira corpus (BENCHMARKS.md, forty-first
// round): a 6.6 KB body was scanned three times, about 9 ns a byte.
// Anything json.Marshal does not write (white space, a key twice or in
// another case, a null, an unknown key) is decoded by json.Unmarshal.
func DecodeNormalized(data string, n *Normalized) error {
	*n = Normalized{}
	if (&normalizedReader{s: data}).read(n) {
		return nil
	}
	*n = Normalized{}
	return json.Unmarshal([]byte(data), n)
}

// normalizedReader reads the object json.Marshal writes for a Normalized;
// each method reports false for what it does not read, and the caller
// decodes the whole with json.Unmarshal.
type normalizedReader struct {
	s     string
	i     int
	depth int // of objects and arrays, at most maxDepth as in encoding/json
}

// maxDepth is encoding/json's limit on nesting, beyond which it fails.
const maxDepth = 10000

func (r *normalizedReader) next(c byte) bool {
	if r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *normalizedReader) read(n *Normalized) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return r.i == len(r.s)
	}
	var seen [5]bool
	for {
		key, ok := r.str()
		if !ok || !r.next(':') {
			return false
		}
		f := -1
		switch key {
		case "title":
			f = 0
			n.Title, ok = r.str()
		case "body":
			f = 1
			n.Body, ok = r.str()
		case "metadata":
			f = 2
			var v any
			if v, ok = r.top(); ok {
				n.Metadata, ok = v.(map[string]any)
			}
		case "links":
			f = 3
			start := r.i // read to find its end, decoded by encoding/json
			if _, ok = r.top(); ok {
				ok = json.Unmarshal([]byte(r.s[start:r.i]), &n.Links) == nil
			}
		case "warnings":
			f = 4
			var v any
			if v, ok = r.top(); ok {
				n.Warnings, ok = stringsOf(v)
			}
		}
		if f < 0 || !ok || seen[f] {
			return false
		}
		seen[f] = true
		if r.next('}') {
			return r.i == len(r.s)
		}
		if !r.next(',') {
			return false
		}
	}
}

// top reads a value of the document's object (at depth 1 in
// encoding/json's count).
func (r *normalizedReader) top() (any, bool) {
	r.depth = 1
	return r.value()
}

// stringsOf is v as json.Unmarshal makes it into a []string: an array
// holding strings only.
func stringsOf(v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(a))
	for i, e := range a {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// value reads any JSON value as json.Unmarshal reads it into an any.
func (r *normalizedReader) value() (any, bool) {
	if r.i >= len(r.s) {
		return nil, false
	}
	switch c := r.s[r.i]; {
	case c == '"':
		return r.str()
	case c == '{' || c == '[':
		if r.depth++; r.depth > maxDepth {
			return nil, false
		}
		defer func() { r.depth-- }()
		if r.i++; c == '{' {
			return r.object()
		}
		return r.array()
	case c == 't':
		return true, r.literal("true")
	case c == 'f':
		return false, r.literal("false")
	case c == 'n':
		return nil, r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	}
	return nil, false
}

// object reads the members of an object whose brace has been read. A name
// given twice keeps its last value, as in json.Unmarshal.
func (r *normalizedReader) object() (map[string]any, bool) {
	m := map[string]any{}
	if r.next('}') {
		return m, true
	}
	for {
		k, ok := r.str()
		if !ok || !r.next(':') {
			return nil, false
		}
		if m[k], ok = r.value(); !ok {
			return nil, false
		}
		if r.next('}') {
			return m, true
		}
		if !r.next(',') {
			return nil, false
		}
	}
}

// array reads the elements of an array whose bracket has been read.
func (r *normalizedReader) array() ([]any, bool) {
	a := []any{}
	if r.next(']') {
		return a, true
	}
	for {
		v, ok := r.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if r.next(']') {
			return a, true
		}
		if !r.next(',') {
			return nil, false
		}
	}
}

func (r *normalizedReader) literal(word string) bool {
	if strings.HasPrefix(r.s[r.i:], word) {
		r.i += len(word)
		return true
	}
	return false
}

// number reads a number by JSON's grammar, as a float64.
func (r *normalizedReader) number() (any, bool) {
	s, i := r.s, r.i
	digits := func() bool {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if !digits() {
		return nil, false
	}
	if i < len(s) && s[i] == '.' {
		if i++; !digits() {
			return nil, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		if i++; i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(s[r.i:i], 64)
	if err != nil {
		return nil, false
	}
	r.i = i
	return f, true
}

// plain marks the bytes a JSON string holds as they are: not a quote, a
// backslash, a control character or the start of a multi-byte sequence.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string as json.Unmarshal does (encoding/json's unquote): a
// string of plain bytes and valid UTF-8 is a substring of r.s; escapes are
// decoded, an invalid surrogate or byte becomes U+FFFD.
func (r *normalizedReader) str() (string, bool) {
	if !r.next('"') {
		return "", false
	}
	s, start := r.s, r.i
	i := start
	for i < len(s) {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c == '"' {
			r.i = i + 1
			return s[start:i], true
		}
		if c < utf8.RuneSelf { // a backslash or a control character
			break
		}
		rr, size := utf8.DecodeRuneInString(s[i:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	var b strings.Builder
	b.Grow(quoteAt(s, i) - start)
	b.WriteString(s[start:i])
	for i < len(s) {
		c := s[i]
		switch {
		case plain[c]:
			j := i + 1
			for j < len(s) && plain[s[j]] {
				j++
			}
			b.WriteString(s[i:j])
			i = j
		case c == '"':
			r.i = i + 1
			return b.String(), true
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr := hex4(s, i+2)
				if rr < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(rr) {
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s, i+2)); dec != unicode.ReplacementChar {
							i += 6
							b.WriteRune(dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b.WriteRune(rr)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf: // a control character
			return "", false
		default:
			rr, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(rr) // U+FFFD for an invalid byte, as encoding/json
			i += size
		}
	}
	return "", false
}

// quoteAt returns where the string that holds s[i] ends: its closing quote,
// or len(s). Unescaping makes it no longer, but for U+FFFD in place of an
// invalid byte.
func quoteAt(s string, i int) int {
	for {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return len(s)
		}
		i += j
		k := i
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 { // not escaped
			return i
		}
		i++
	}
}

// hex4 reads the four hex digits at s[i:], or returns -1.
func hex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
