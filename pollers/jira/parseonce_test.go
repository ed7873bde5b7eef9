package jira

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
)

// parseTwoStep is Parse as it read an object first: a probe for issues,
// key and fields, then each issue decoded again.
func parseTwoStep(payload []byte) ([]store.Document, error) {
	payload = bytes.TrimSpace(payload)
	var items []json.RawMessage
	switch {
	case len(payload) > 0 && payload[0] == '[':
		if err := json.Unmarshal(payload, &items); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotJira, err)
		}
	case len(payload) > 0 && payload[0] == '{':
		var probe struct {
			Issues json.RawMessage `json:"issues"`
			Key    json.RawMessage `json:"key"`
			Fields json.RawMessage `json:"fields"`
		}
		if err := json.Unmarshal(payload, &probe); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotJira, err)
		}
		switch {
		case probe.Issues != nil:
			if err := json.Unmarshal(probe.Issues, &items); err != nil {
				return nil, fmt.Errorf("%w: issues: %v", ErrNotJira, err)
			}
		case probe.Key != nil || probe.Fields != nil:
			items = []json.RawMessage{payload}
		default:
			return nil, ErrNotJira
		}
	default:
		return nil, ErrNotJira
	}
	docs := make([]store.Document, 0, len(items))
	for i, raw := range items {
		d, err := Issue(raw)
		if err != nil {
			d = unparsable(raw, fmt.Errorf("issue %d: %w", i+1, err))
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// An object read once gives what the probe and a second read gave: the
// same documents, or the same error, for single issues, search results
// and everything in between that could tell them apart.
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
		want, wantErr := parseTwoStep([]byte(in))
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && (gotErr.Error() != wantErr.Error() || !errors.Is(gotErr, ErrNotJira)) {
			t.Errorf("%.80q:\n got %+v, %v\nwant %+v, %v", in, got, gotErr, want, wantErr)
		}
	}
}
