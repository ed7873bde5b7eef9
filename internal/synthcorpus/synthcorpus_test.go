package synthcorpus_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/synthcorpus"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// The files parse, through the real kinds, into exactly the documents
// Write counts, none unparsable; sources share people; sizes span one line
// to tens of thousands of characters; the same n writes the same bytes.
func TestWriteParsesIntoItsDocuments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := synthcorpus.Write(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if c.Documents() != 1000 || c.Issues == 0 || c.Messages == 0 || c.Pages == 0 {
		t.Fatalf("counts %+v", c)
	}
	reg := kinds.Default()
	entries, _ := os.ReadDir(dir)
	bySource := map[store.SourceType]int{}
	senders := map[string]bool{}
	var sizes []int
	replies, links := 0, 0
	var assignees []string
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		err = reg.ParseFile(e.Name(), f, func(d store.Document) error {
			if reason, ok := d.Normalized.Metadata[store.MetaParseError]; ok {
				return fmt.Errorf("%s %s unparsable: %v", e.Name(), d.ExternalID, reason)
			}
			bySource[d.SourceType]++
			sizes = append(sizes, len(d.Normalized.Body))
			links += strings.Count(d.Normalized.Body, "https://")
			if d.SourceType == store.SourceEmail {
				if from, _ := d.Normalized.Metadata["from"].(string); from != "" {
					senders[strings.ToLower(from)] = true
				}
				if strings.HasPrefix(d.Normalized.Title, "Re: ") {
					replies++
				}
			}
			if d.SourceType == store.SourceJira {
				if a, _ := d.Normalized.Metadata["assignee"].(string); a != "" {
					assignees = append(assignees, a)
				}
			}
			return nil
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if bySource[store.SourceJira] != c.Issues || bySource[store.SourceEmail] != c.Messages || bySource[store.SourceFile] != c.Pages {
		t.Fatalf("parsed %v, wrote %+v", bySource, c)
	}
	shared := 0
	for _, a := range assignees {
		for s := range senders {
			if strings.Contains(s, a) {
				shared++
				break
			}
		}
	}
	if shared < len(assignees)/2 || links < 1000 {
		t.Fatalf("%d of %d assignees send mail; %d links", shared, len(assignees), links)
	}
	slices.Sort(sizes)
	if sizes[0] > 200 || sizes[len(sizes)-1] < 50_000 || replies == 0 {
		t.Fatalf("body sizes %d..%d, %d replies", sizes[0], sizes[len(sizes)-1], replies)
	}
	again := t.TempDir()
	if _, err := synthcorpus.Write(again, 1000); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b, _ := os.ReadFile(filepath.Join(again, e.Name()))
		if sha256.Sum256(a) != sha256.Sum256(b) {
			t.Fatalf("%s differs between two writes", e.Name())
		}
	}
}
