package sqlitedb

import (
	"encoding/json"
	"slices"
	"testing"
)

// The ID lists keep every byte both ways, and read what encoding/json
// writes (escapes included) as encoding/json reads it.
func TestJSONListsKeepTheirBytes(t *testing.T) {
	ids := []string{"", "c1", `q"uo\te`, "tab\there\nnl\x00nul\x1f", "ç é ü", "\u2028\u2029<>&", "😀", "bad\xff", "\xed\xa0\x80x", "ab\xc3"}
	got, err := DecodeJSONList(JSONList(ids))
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("round trip: %q, %v; want %q", got, err, ids)
	}
	if got, err := DecodeJSONList(JSONList(nil)); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty: %q, %v", got, err)
	}
	valid := ids[:7]
	std, _ := json.Marshal(valid) // escapes <, >, &, U+2028 and U+2029 as \u
	for _, in := range []string{string(std), ` [ "a" , "b\/c", "\ud83d\ude00", "\ud83d", "\u00e9", "\ud83d\u00e9", "\ude00x" ] `} {
		var want []string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeJSONList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("decode %s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "[", `["a"`, `["a",]`, `["a" "b"]`, `[1]`, `["\x"]`, `["\u12"]`, `{}`, `["a"]x`, `["a`} {
		if got, err := DecodeJSONList(bad); err == nil {
			t.Errorf("decode %q: %q, want an error", bad, got)
		}
	}
}
