package sqlitedb

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Lists of keys and IDs travel to and from SQLite as JSON arrays of
// strings (json_each, json_group_array). SQLite's JSON functions keep a
// string's bytes as they are, valid UTF-8 or not; Go's encoding/json does
// not (an invalid byte becomes U+FFFD both ways), so an ID that is not
// valid UTF-8 was neither found by its lookups nor read back as written.
// JSONList and DecodeJSONList keep every byte, and skip encoding/json's
// reflection.

// JSONList encodes ids as a JSON array of strings for json_each: quote,
// backslash and control characters escaped, every other byte as it is;
// nil is the empty array.
func JSONList(ids []string) string {
	n := 2
	for _, id := range ids {
		n += len(id) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		for j := 0; j < len(id); j++ {
			switch c := id[j]; {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
		}
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

const hexDigits = "0123456789abcdef"

var errJSONList = errors.New("not a JSON array of strings")

// DecodeJSONList decodes a JSON array of strings as SQLite's json_group_array
// writes it, keeping the bytes of its strings that are not escapes as
// they are (valid UTF-8 or not). Escapes are JSON's; a \u escape of a
// lone surrogate becomes U+FFFD, as encoding/json decodes it.
func DecodeJSONList(s string) ([]string, error) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return nil, errJSONList
	}
	out := []string{}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return out, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return nil, errJSONList
		}
		id, next, err := decodeString(s, i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
		i = skipSpace(s, next)
		if i >= len(s) {
			return nil, errJSONList
		}
		switch s[i] {
		case ']':
			if skipSpace(s, i+1) != len(s) {
				return nil, errJSONList
			}
			return out, nil
		case ',':
			i = skipSpace(s, i+1)
		default:
			return nil, errJSONList
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// decodeString decodes the JSON string whose body starts at s[i] (after
// its opening quote) and returns it and the index after its closing quote.
func decodeString(s string, i int) (string, int, error) {
	start := i
	for i < len(s) && s[i] != '"' && s[i] != '\\' {
		i++
	}
	if i < len(s) && s[i] == '"' {
		return s[start:i], i + 1, nil // no escapes: the bytes as they are
	}
	b := []byte(s[start:i])
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return string(b), i + 1, nil
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, errJSONList
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b, i = append(b, e), i+2
		case 'b':
			b, i = append(b, '\b'), i+2
		case 'f':
			b, i = append(b, '\f'), i+2
		case 'n':
			b, i = append(b, '\n'), i+2
		case 'r':
			b, i = append(b, '\r'), i+2
		case 't':
			b, i = append(b, '\t'), i+2
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return "", 0, errJSONList
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair is two escapes; a surrogate alone is U+FFFD.
				low, ok := rune(0), strings.HasPrefix(s[i:], `\u`)
				if ok {
					low, ok = hex4(s, i+2)
				}
				if r = utf16.DecodeRune(r, low); ok && r != utf8.RuneError {
					i += 6
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", 0, errJSONList
		}
	}
	return "", 0, errJSONList
}

// hex4 reads the four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(s[i:i+4], 16, 32)
	return rune(v), err == nil
}
