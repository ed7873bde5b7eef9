package mongo

import (
	"testing"

	"go.mongodb.org/mongo-driver/bson"
	mgo "go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// A store made by an earlier version has the identity facts' "source"
// index, which "order" made redundant: opening it drops that index and
// makes the ones it lacks.
func TestOpenDropsRetiredIndexes(t *testing.T) {
	ctx := t.Context()
	s := openDropped(t, Options{Database: "jervis_test_retired"})
	// As an earlier version left it: "source", and no "order" yet.
	if _, err := s.facts.Indexes().CreateOne(ctx, mgo.IndexModel{Keys: bson.D{{Key: "client", Value: 1}, {Key: "source", Value: 1}},
		Options: options.Index().SetName("source")}); err != nil {
		t.Fatal(err)
	}
	names := func() map[string]bool {
		t.Helper()
		cur, err := s.facts.Indexes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var have []struct {
			Name string `bson:"name"`
		}
		if err := cur.All(ctx, &have); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, h := range have {
			out[h.Name] = true
		}
		return out
	}
	if got := names(); !got["source"] || got["order"] {
		t.Fatalf("not as an earlier version left it: %v", got)
	}
	again, err := Open(ctx, Options{URI: testURI(t), Database: "jervis_test_retired"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := names(); got["source"] || !got["order"] || !got["ref"] {
		t.Fatalf("indexes after the open: %v", got)
	}
}
