package kb_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
)

func TestSimilarQueryTakesTheTitleThenTheRepeatedWords(t *testing.T) {
	t.Parallel()
	body := "Hi all, the session cache keeps the old password. The cache expires after an hour; until the cache expires the session is refused."
	got := kb.SimilarQuery("Login fails after a password reset", body, nil)
	want := "login fails after password reset cache session expires hi all keeps old hour until refused"
	if got != want {
		t.Fatalf("SimilarQuery = %q, want %q", got, want)
	}
	// Weighed by rarity, a rare word used once comes before a common one
	// used twice; the title still leads.
	rare := func(w string) float64 {
		if w == "refused" {
			return 1
		}
		return 0.2
	}
	got = kb.SimilarQuery("Login fails after a password reset", body, rare)
	want = "login fails after password reset refused cache session expires hi all keeps old hour until"
	if got != want {
		t.Fatalf("SimilarQuery weighed = %q, want %q", got, want)
	}
}

// TestSimilar: the whole item is the query, by its words and its vector;
// the item itself, a link's context quoting it and other clients' items
// are never among its similar items; the similarity is relative to the
// item's own score.
func TestSimilar(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	issue := func(client, key, title, text, kind string) {
		t.Helper()
		if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: client, MainNode: "jira:" + key, Title: title, Content: text,
			SourceURN: "JIRA:" + key, SourceType: "JIRA", Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	const login = "Users cannot log in after resetting their password: the session service rejects the new credentials until the cache expires."
	issue("acme", "T-1", "Login fails after password reset", login, kb.KindBody)
	issue("acme", "T-2", "Cannot log in after a password reset", "After a password reset the login is rejected until the session cache expires.", kb.KindBody)
	issue("acme", "T-3", "Dark mode for the settings page", "The settings page should follow the system's dark mode.", kb.KindBody)
	issue("acme", "T-4", "Password reset mail is late", "The password reset mail arrives an hour late.", kb.KindBody)
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "link:https://example.test/reset", Content: "Link found in T-1:\n\n" + login,
		SourceURN: "link:1", SourceType: "JIRA", Kind: kb.KindLink}); err != nil {
		t.Fatal(err)
	}
	issue("globex", "T-9", "Login fails after password reset", login, kb.KindBody)

	res, err := e.kb.Similar(ctx, kb.SimilarRequest{Client: "acme", SourceURN: "JIRA:T-1", Title: "Login fails after password reset", Text: login, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var urns []string
	for _, it := range res.Items {
		urns = append(urns, it.SourceURN)
		if it.Score <= 0 || it.Score > 1 || it.Kind != kb.ItemSource || len(it.Passages) == 0 || it.Passages[0].Text == "" || it.NodeKeys[0] != "jira:t-"+it.SourceURN[len("JIRA:T-"):] {
			t.Fatalf("item %+v", it)
		}
	}
	if len(urns) < 2 || urns[0] != "JIRA:T-2" || urns[1] != "JIRA:T-4" || slices.Contains(urns, "JIRA:T-1") || slices.Contains(urns, "link:1") {
		t.Fatalf("similar items %v", urns)
	}
	if res.Node != "jira:t-1" || len(res.Self) == 0 || res.Self[0].Score != 1 || res.Self[0].Text == "" || res.Items[0].Score <= res.Items[1].Score {
		t.Fatalf("self %q %+v, scores %v %v", res.Node, res.Self, res.Items[0].Score, res.Items[1].Score)
	}

	// Possible duplicates: above the similarity, not already linked, one
	// undirected edge whichever side found it, with both sides' passages.
	keys, err := e.kb.PossibleDuplicates(ctx, "acme", res, res.Items[0].Score)
	if err != nil || len(keys) != 1 || keys[0] != graph.EdgeKey(kb.EdgePossibleDuplicate, "jira:t-1", "jira:t-2") {
		t.Fatalf("possible duplicates %v %v", keys, err)
	}
	edge, err := e.graph.For("acme").Edge(ctx, keys[0])
	if err != nil || edge.Origin != graph.OriginSimilarity || edge.Confidence != res.Items[0].Score ||
		!slices.Equal(edge.EvidenceChunkIDs, []string{res.Self[0].ChunkID, res.Items[0].Passages[0].ChunkID}) {
		t.Fatalf("edge %+v %v", edge, err)
	}
	back, err := e.kb.Similar(ctx, kb.SimilarRequest{Client: "acme", SourceURN: "JIRA:T-2", Title: "Cannot log in after a password reset",
		Text: "After a password reset the login is rejected until the session cache expires.", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := e.kb.PossibleDuplicates(ctx, "acme", back, 0.01); err != nil || !slices.Equal(again, keys) {
		t.Fatalf("from the other side: %v %v", again, err)
	}
	// Items a person already linked get none.
	if _, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:T-4", Title: "Password reset mail is late", Content: "The password reset mail arrives an hour late.",
		Relations: []kb.MetaRelation{{From: "jira:T-4", Type: "relates", To: "jira:T-1"}}, SourceURN: "JIRA:T-4", SourceType: "JIRA", Kind: kb.KindBody}); err != nil {
		t.Fatal(err)
	}
	// (From SimilarAlpha up: more than the vector side alone can give,
	// which the unrelated T-3 has a little of.)
	if edges, err := e.kb.DuplicateEdges(ctx, "acme", res, kb.SimilarAlpha); err != nil || len(edges) != 1 || edges[0].To != "jira:t-2" {
		t.Fatalf("edges past a linked item: %+v %v", edges, err)
	}

	// An item that shares no word with it is found by its vector (GloVe's),
	// below those that share its words and above one about something else;
	// by the vector alone neither is more than SimilarAlpha alike.
	issue("acme", "T-5", "Authentication errors", "Authentication is denied for accounts whose passcode was changed.", kb.KindBody)
	issue("acme", "T-6", "Colour palette", "The colour palette of the chart uses pastel tones.", kb.KindBody)
	res, err = e.kb.Similar(ctx, kb.SimilarRequest{Client: "acme", SourceURN: "JIRA:T-1", Title: "Login fails after password reset", Text: login, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	urns = urns[:0]
	for _, it := range res.Items {
		urns = append(urns, it.SourceURN)
	}
	i, j := slices.Index(urns, "JIRA:T-5"), slices.Index(urns, "JIRA:T-6")
	if i < 2 || j >= 0 && j < i || res.Items[i].Score > kb.SimilarAlpha || res.Items[i].Score >= res.Items[1].Score {
		t.Fatalf("similar items by vector: %v", urns)
	}

	if _, err := e.kb.Similar(ctx, kb.SimilarRequest{Client: "acme", SourceURN: "JIRA:T-404", Title: "x", Text: "y"}); !errors.Is(err, kb.ErrNotIndexed) {
		t.Fatalf("an item not indexed: %v", err)
	}
}
