package pollers_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
)

// A page stored together keeps its order and its receipts; a document the
// store refuses is stored as unparsable with the reason, and the others
// are stored as given. The same page again stores nothing new.
func TestDocumentsStoredTogether(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := pollers.Ingester{Store: s, Priority: store.PriorityLive}
	page := []store.Document{
		{SourceType: store.SourceEmail, ExternalID: "m1", Raw: []byte("one"), Normalized: store.Normalized{Title: "one"}},
		{SourceType: "fax machine", ExternalID: "f1", Raw: []byte("beep"), Normalized: store.Normalized{Title: "fax"}},
		{SourceType: store.SourceEmail, ExternalID: "m1", Raw: []byte("one, edited"), Normalized: store.Normalized{Title: "one"}},
	}
	rs, err := in.Documents(ctx, "acme", "inbox", page...)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || !rs[0].Created || rs[0].Version != 1 || rs[2].Version != 2 || rs[0].Unparsable != "" {
		t.Fatalf("receipts %+v", rs)
	}
	if rs[1].SourceType != store.SourceFile || !rs[1].Created || !strings.Contains(rs[1].Unparsable, "refused by the store") || !strings.Contains(rs[1].Unparsable, "sourceType") {
		t.Fatalf("the refused document: %+v", rs[1])
	}
	d, err := s.GetDocument(ctx, "acme", rs[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Connection != "inbox" || d.Priority != store.PriorityLive || string(d.Raw) != "one, edited" {
		t.Fatalf("stored %+v", d)
	}
	again, err := in.Documents(ctx, "acme", "inbox", page...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Created || r.ID != rs[i].ID {
			t.Fatalf("again, document %d: %+v, first %+v", i, r, rs[i])
		}
	}
}
