package store

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// decodeBoth decodes data with DecodeNormalized and with json.Unmarshal and
// fails unless both give the same value, or both an error.
func decodeBoth(t testing.TB, data string) {
	t.Helper()
	var got, want Normalized
	gotErr := DecodeNormalized(data, &got)
	wantErr := json.Unmarshal([]byte(data), &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, json.Unmarshal's %v", data, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
	}
}

// randomText mixes what bodies carry: ASCII, markup json.Marshal escapes,
// control characters, multi-byte runes, runes outside the BMP and bytes
// that are not UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Ti.UI.Window ", "\n", "\t", "\r", "<b>", "&amp;", `"`, `\`, "/", "\x00", "\x1f", "\x7f",
		"é", "日本", "😀", "\u2028", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80", " ", "TIMOB-1234", "\b\f"}
	var b strings.Builder
	for range r.IntN(40) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomNormalized(r *rand.Rand) Normalized {
	n := Normalized{Title: randomText(r), Body: randomText(r)}
	if r.IntN(2) == 0 {
		n.Metadata = map[string]any{"key": randomText(r), "n": r.IntN(100), "list": []any{randomText(r), 1.5, nil, true},
			"people": []any{map[string]any{"ref": randomText(r)}}}
	}
	if r.IntN(2) == 0 {
		n.Links = []Link{{URL: "https://example.com/" + randomText(r), Context: randomText(r)}}
	}
	for range r.IntN(3) {
		n.Warnings = append(n.Warnings, randomText(r))
	}
	return n
}

// TestDecodeNormalizedIsUnmarshal compares DecodeNormalized with
// json.Unmarshal on what json.Marshal writes, on the same with its bytes
// damaged, and on JSON it does not write (white space, nulls, other keys,
// escapes it never uses).
func TestDecodeNormalizedIsUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b, err := json.Marshal(randomNormalized(r))
		if err != nil {
			t.Fatal(err)
		}
		decodeBoth(t, string(b))
		for range 3 {
			d := []byte(string(b))
			for range 1 + r.IntN(3) {
				d[r.IntN(len(d))] = `{}[]",:\u0ab /nulltrue 1`[r.IntN(24)]
			}
			decodeBoth(t, string(d))
		}
		decodeBoth(t, string(b[:r.IntN(len(b))]))
	}
	for _, s := range []string{
		``, `{}`, `{} `, ` {}`, `{"title":"a"}x`, `null`, `[]`, `{"title":null}`, `{"title":1}`, `{"Title":"a"}`,
		`{"title":"a","title":"b"}`, `{"body":"x","other":{"a":[1,2]}}`, `{ "title" : "a" }`,
		`{"title":"\ud83d\ude00"}`, `{"title":"\ud83d"}`, `{"title":"\ud83dx"}`, `{"title":"\ud83d\u0041"}`, `{"title":"\ude00\ud83d"}`,
		`{"title":"\u00E9\u00e9"}`, `{"title":"\'"}`, `{"title":"\x"}`, `{"title":"\u12"}`, `{"title":"\u12G4"}`,
		`{"title":"a` + "\x01" + `"}`, `{"title":"` + "\xff\xfe" + `"}`, `{"title":"\/\b\f\n\r\t\\\""}`,
		`{"warnings":[]}`, `{"warnings":null}`, `{"warnings":["a",]}`, `{"warnings":["a" "b"]}`, `{"warnings":["a",1]}`,
		`{"metadata":{"a":"}"}}`, `{"metadata":{"a":"\"}"}}`, `{"metadata":{"a":1}`, `{"metadata":[1]}`, `{"metadata":{}}`,
		`{"links":[{"url":"u","context":"t"}]}`, `{"links":[{"URL":"u"}]}`, `{"links":{}}`, `{"links":[}`,
		`{"title":"a",}`, `{"title":"a""body":"b"}`, `{,}`, `{"title"}`, `{"title":"a"`, `{"title":"a\`,
		`{"metadata":{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}`,
		`{"metadata":{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}}`,
		`{"metadata":{"a":-0.5e+3,"b":1E2,"c":01,"d":1.,"e":-,"f":1e999,"g":.5,"h":tru,"i":nul}}`,
	} {
		decodeBoth(t, s)
	}
}

// FuzzDecodeNormalized: `go test -fuzz FuzzDecodeNormalized ./internal/store`.
func FuzzDecodeNormalized(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		b, _ := json.Marshal(randomNormalized(r))
		f.Add(string(b))
	}
	f.Add(`{"title":"\ud83d\ude00","warnings":["a"],"metadata":{"x":"}"}}`)
	f.Fuzz(func(t *testing.T, s string) { decodeBoth(t, s) })
}

// TestDecodeNormalizedShares checks that a body with nothing to unescape is
// not copied (the point of the substring).
func TestDecodeNormalizedShares(t *testing.T) {
	data := `{"title":"t","body":"` + strings.Repeat("plain text ", 100) + `"}`
	var n Normalized
	if err := DecodeNormalized(data, &n); err != nil {
		t.Fatal(err)
	}
	base, body := uintptr(unsafe.Pointer(unsafe.StringData(data))), uintptr(unsafe.Pointer(unsafe.StringData(n.Body)))
	if n.Body != strings.Repeat("plain text ", 100) || body < base || body >= base+uintptr(len(data)) {
		t.Fatalf("body %q not a substring of the data", n.Body)
	}
	if testing.AllocsPerRun(100, func() { _ = DecodeNormalized(data, &n) }) != 0 {
		t.Fatal("a plain title and body allocated")
	}
}

func BenchmarkDecodeNormalized(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	n := randomNormalized(r)
	n.Body = strings.Repeat("In the WPCM450 SoC, the clocks for each timer can be gated <individually>.\n", 90)
	data, _ := json.Marshal(n)
	b.SetBytes(int64(len(data)))
	b.Run("DecodeNormalized", func(b *testing.B) {
		for b.Loop() {
			var n Normalized
			if err := DecodeNormalized(string(data), &n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var n Normalized
			if err := json.Unmarshal(data, &n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
