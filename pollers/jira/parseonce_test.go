package jira

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// An object read once gives what parseItems (the probe, then each item
// read again) gives it: the same documents, or the same error, for single
// issues, search results and everything in between that could tell them
// apart.
func TestParseOnceIsParseTwice(t *testing.T) {
	t.Parallel()
	inputs := []string{
		`{"key": "A-1", "fields": {"summary": "one"}}`,
		`  {"key": "A-1", "fields": {"summary": "one", "description": "body", "labels": ["x"]}}  `,
		`{"key": "A-1"}`, `{"fields": {"summary": "no key"}}`, `{"key": "A-1", "fields": {"summary": " "}}`,
		`{"key": null, "fields": null}`, `{"key": null}`, `{"fields": null}`, `{"key": ""}`, `{"key": "", "fields": {}}`,
		`{"key": 7, "fields": {"summary": "wrong key type"}}`, `{"key": "A-2", "fields": {"summary": 42}}`,
		`{"key": "A-3", "fields": {"summary": "labels", "labels": "not-a-list"}}`, `{"key": "A-4", "fields": []}`,
		`{"issues": [{"key": "B-1", "fields": {"summary": "in a search"}}], "key": "A-5", "fields": {"summary": "beside"}}`,
		`{"issues": null, "key": "A-6", "fields": {"summary": "issues null"}}`, `{"issues": {}}`, `{"issues": 3}`,
		`{"total": 0, "issues": []}`, `{"other": 1}`, `{}`, `{"KEY": "A-7", "Fields": {"Summary": "case"}}`,
		`{"key": "A-8", "key": "A-9", "fields": {"summary": "twice"}}`, `{"key": "A-10", "fields": {"summary": "cut"`,
		`{"key": "A-11", "fields": {"summary": "\ud800 lone surrogate", "description": "\u00e9"}}`, "{\"key\": \"A-12\", \"fields\": {\"summary\": \"bad \xff byte\"}}",
		`[{"key": "C-1", "fields": {"summary": "array"}}]`, `[]`, `"text"`, ``, `{"key": "A-13", "fields": {"summary": "x", "comment": {"comments": [{"body": {"type": "doc", "content": [{"type": "text", "text": "adf"}]}}]}}}`,
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		got, gotErr := Parse([]byte(in))
		want, wantErr := parseItems(bytes.TrimSpace([]byte(in)))
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && (gotErr.Error() != wantErr.Error() || !errors.Is(gotErr, ErrNotJira)) {
			t.Errorf("%.80q:\n got %+v, %v\nwant %+v, %v", in, got, gotErr, want, wantErr)
		}
	}
}
