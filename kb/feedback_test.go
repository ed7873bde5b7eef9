package kb_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/kb"
)

func TestFeedbackQueryTakesTheItemsTellingWords(t *testing.T) {
	t.Parallel()
	rare := func(w string) float64 {
		if w == "the" || w == "crash" || w == "app" {
			return 0.1
		}
		return 1
	}
	got := kb.FeedbackQuery("App crash", "The app crash: CameraActivity throws. CameraActivity again, the app, the app, the app.", 3, rare)
	if got != "cameraactivity throws again" {
		t.Fatalf("got %q", got)
	}
	if got := kb.FeedbackQuery("a b", "of the", 5, nil); got != "" {
		t.Fatalf("stop words and single letters: %q", got)
	}
	if got := kb.FeedbackQuery("x1 y2", "y2 y2 z3", 2, nil); got != "y2 x1" { // repeated first, then first seen
		t.Fatalf("unweighted: %q", got)
	}
	// A word weighed 0 is too common to tell: left out, the next word
	// takes its place.
	common := func(w string) float64 {
		if w == "cameraactivity" {
			return 0
		}
		return rare(w)
	}
	if got := kb.FeedbackQuery("App crash", "The app crash: CameraActivity throws. CameraActivity again, the app, the app, the app.", 3, common); got != "throws again app" {
		t.Fatalf("weighed 0: %q", got)
	}
}

func TestCoverageWeighsTheQuerysWords(t *testing.T) {
	t.Parallel()
	weigh := func(w string) float64 {
		if w == "team" {
			return 0.2
		}
		return 1
	}
	for _, c := range []struct {
		query, text string
		want        float64
	}{
		{"team trip to Portugal", "the data team grows", 0.2 / 2.2},
		{"team trip to Portugal", "A trip to Portugal for the team.", 1},
		{"team trip", "", 0},
		{"the of", "the of", 0}, // no query words
	} {
		if got := kb.Coverage(c.query, c.text, weigh); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("Coverage(%q, %q) = %v, want %v", c.query, c.text, got, c.want)
		}
	}
}

// The best item's own words find an item that says the same in other
// words; a best item that holds too little of the query feeds nothing back.
func TestSearchFeedback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for _, r := range []kb.IngestRequest{
		{Client: "acme", MainNode: "jira:MOB-1", Title: "App crashes when opening the camera", SourceURN: "JIRA:MOB-1",
			Content: "Opening the camera from the app crashes with a NullPointerException in CameraActivity.onResume. Stack trace attached; CameraActivity never gets its preview surface."},
		{Client: "acme", MainNode: "jira:MOB-2", Title: "NullPointerException in CameraActivity.onResume", SourceURN: "JIRA:MOB-2",
			Content: "CameraActivity.onResume dereferences the preview surface before it exists. NullPointerException, stack trace below."},
		{Client: "acme", MainNode: "jira:MOB-3", Title: "Settings screen crashes", SourceURN: "JIRA:MOB-3",
			Content: "The app crashes when opening the settings screen on tablets."},
		{Client: "acme", MainNode: "jira:MOB-4", Title: "Tripod mount", SourceURN: "JIRA:MOB-4",
			Content: "Order a tripod mount for the test phones."},
	} {
		if _, err := e.kb.Ingest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	search := func(query string, noFeedback bool) ([]string, string) {
		t.Helper()
		pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: query, Alpha: ptr(0.0), Expand: ptr(0), NoFeedback: noFeedback})
		if err != nil {
			t.Fatal(err)
		}
		var urns []string
		for _, it := range pack.Items {
			if it.Kind == kb.ItemSource {
				urns = append(urns, it.SourceURN)
			}
		}
		return urns, pack.Feedback
	}
	plain, fq := search("app crashes opening camera", true)
	if slices.Contains(plain, "JIRA:MOB-2") || fq != "" || len(plain) == 0 || plain[0] != "JIRA:MOB-1" {
		t.Fatalf("without feedback: %v %q", plain, fq)
	}
	fed, fq := search("app crashes opening camera", false)
	if len(fed) < 2 || fed[0] != "JIRA:MOB-1" || !slices.Contains(fed, "JIRA:MOB-2") || !strings.Contains(fq, "cameraactivity") {
		t.Fatalf("with feedback: %v %q", fed, fq)
	}
	// "camera tripod holder": the best item holds "camera" alone of three
	// words: its words would be a guess.
	if urns, fq := search("camera tripod holder", false); fq != "" || len(urns) == 0 {
		t.Fatalf("weak best item fed back %q: %v", fq, urns)
	}
}

// Feedback and similar items weigh an item's words by how rare they are
// in this client's corpus: a project's name that every item repeats
// (unknown to the embedder's general weights, which would rank it first)
// comes after a word few items use.
func TestQueriesWeighWordsByTheClientsCorpus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for i := range 20 {
		r := kb.IngestRequest{Client: "acme", MainNode: fmt.Sprintf("jira:ZX-%d", i), SourceURN: fmt.Sprintf("JIRA:ZX-%d", i),
			Title: fmt.Sprintf("Zorbix build %d", i), Content: fmt.Sprintf("Zorbix release %d of the zorbix tools.", i)}
		if i == 0 {
			r.Title, r.Content = "Zorbix keychain crash", "Zorbix zorbix zorbix zorbix: the keychain crash in zorbix."
		}
		if _, err := e.kb.Ingest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	fed, similar := itemQueries(t, e, "zorbix keychain crash", "Zorbix zorbix zorbix zorbix: the keychain crash in zorbix.")
	if i := slices.Index(fed, "zorbix"); i < 0 || i < slices.Index(fed, "keychain") {
		t.Fatalf("feedback query %q: zorbix before keychain", fed)
	}
	if i := slices.Index(similar, "zorbix"); i < 0 || i < slices.Index(similar, "keychain") {
		t.Fatalf("similar query %q: zorbix before keychain", similar)
	}
}

// itemQueries returns the words of acme's search for query that feedback
// searched by, and those JIRA:ZX-0 (titled "Crash report", text its text)
// is searched by for its similar items.
func itemQueries(t *testing.T, e env, query, text string) (feedback, similar []string) {
	t.Helper()
	ctx := t.Context()
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: query, Alpha: ptr(0.0), Expand: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.kb.Similar(ctx, kb.SimilarRequest{Client: "acme", SourceURN: "JIRA:ZX-0", Title: "Crash report", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(pack.Feedback), strings.Fields(res.Query)
}

// A word held by more than kb.CommonShare of the client's chunks (and by
// more than a small index's floor) is left out of the feedback and
// similar items' queries however often the item repeats it; a word held by
// fewer is weighed by its rarity as before.
func TestQueriesLeaveOutWordsTooCommonToTell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	// 160 items: every one says "zorbix" (160 chunks, over the floor of
	// 100 and 0.5 % of them), 90 say "gadget" (under the floor: kept).
	const crash = "Zorbix zorbix zorbix gadget gadget: the keychain crash in zorbix, the keychain daemon."
	for i := range 160 {
		r := kb.IngestRequest{Client: "acme", MainNode: fmt.Sprintf("jira:ZX-%d", i), SourceURN: fmt.Sprintf("JIRA:ZX-%d", i),
			Title: fmt.Sprintf("Release %d", i), Content: fmt.Sprintf("Zorbix release %d.", i)}
		if i < 90 {
			r.Content = fmt.Sprintf("Zorbix gadget release %d.", i)
		}
		if i == 0 {
			r.Title, r.Content = "Keychain crash", crash
		}
		if _, err := e.kb.Ingest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	fed, similar := itemQueries(t, e, "keychain crash daemon", crash)
	if slices.Contains(fed, "zorbix") || !slices.Contains(fed, "keychain") || !slices.Contains(fed, "gadget") {
		t.Fatalf("feedback query %q: want keychain and gadget, not zorbix", fed)
	}
	if slices.Contains(similar, "zorbix") || !slices.Contains(similar, "keychain") || !slices.Contains(similar, "gadget") {
		t.Fatalf("similar query %q: want keychain and gadget, not zorbix", similar)
	}
}
