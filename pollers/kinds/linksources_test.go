package kinds_test

import (
	"encoding/json"
	"io/fs"
	"testing"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// The indexer makes a document's Shape for its HTML and Sender only where
// the kind says its Shapes may carry them (About.LinkSources): every demo
// document of the other kinds has neither, and mail's have them.
func TestLinkSourcesAreWhereTheKindSays(t *testing.T) {
	t.Parallel()
	r := kinds.Default()
	shaped := map[string]int{}
	senders := 0
	err := fs.WalkDir(deploy.Demo(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(deploy.Demo(), path)
		if err != nil {
			return err
		}
		docs, err := r.Parse(path, raw)
		if err != nil {
			return nil // not a file a kind reads
		}
		for _, doc := range docs {
			// The metadata as read back from the store: decoded JSON.
			b, _ := json.Marshal(doc.Normalized.Metadata)
			doc.Normalized.Metadata = nil
			json.Unmarshal(b, &doc.Normalized.Metadata)
			kind := r.Kind(doc.SourceType)
			shape := kind.Shape(doc)
			shaped[kind.About().Name]++
			if kind.About().LinkSources {
				if shape.Sender != "" {
					senders++
				}
				continue
			}
			if shape.HTML != "" || shape.Sender != "" {
				t.Errorf("%s (%s): Shape has HTML %d bytes, Sender %q, but the kind says it never has", path, kind.About().Name, len(shape.HTML), shape.Sender)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"email", "jira", "confluence"} {
		if shaped[name] == 0 {
			t.Errorf("no demo document of %s was shaped: %v", name, shaped)
		}
	}
	if senders == 0 {
		t.Error("no email's Shape had a Sender")
	}
	t.Logf("shaped %v", shaped)
}
