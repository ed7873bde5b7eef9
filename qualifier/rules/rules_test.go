package rules_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/deploy"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier/rules"
)

// demoDoc parses a demo file as the qualifier sees it: metadata decoded
// from JSON, as read back from the store.
func demoDoc(t *testing.T, path string) store.Document {
	t.Helper()
	raw, err := fs.ReadFile(deploy.Demo(), path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := registry.Parse(path, raw)
	if err != nil || len(docs) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	d := docs[0]
	b, _ := json.Marshal(d.Normalized.Metadata)
	var m map[string]any
	json.Unmarshal(b, &m)
	d.Normalized.Metadata = m
	return d
}

const R, D = rules.ReadyForGPU, rules.Done

// The rules read a document through its kind's Shape, as the qualifier does.
var registry = kinds.Default()

func structure(d store.Document) kb.IngestRequest { return rules.Structure(registry.Shape(d), d) }

func route(d store.Document, users []string) (string, string) {
	return rules.Route(registry.Shape(d), d, users)
}

func asked(d store.Document) store.Asks { return rules.Asked(registry.Shape(d), d) }

// Hand labels for Bob Smith (the configured user), written from reading each
// message: does it ask Bob for something, or a decision he is part of?
var labels = map[int]string{
	1: R,                             // cc'd: "can we decide on OPS-100 at Thursday's sync?" — a decision he is in
	8: D, 15: D, 22: D, 29: D, 36: D, // to others
	43: D, // "Looping in Bob Smith, who knows this part best." — no ask yet
	50: D, 57: D, 64: D, 71: D, 78: D,
	74: R, 83: R, 84: R, 89: R, // "Hi Bob, could you take a look at … before Friday?"
	85: D, // Bob only cc'd on a request to Hugo
	92: D, 99: D, 106: D, 113: D, 120: D, 127: D, 134: D,
	141: R, // to Bob: "Can you send me the logs from the last failure?"
	148: D, // to Bob: "quick update on OPS-105", a link, no ask
	155: D, 162: D, 169: D, 176: D, 183: D, 190: D, 197: D, 204: D, 211: D, 218: D,
	225: D, // to Bob: "FYI … No action needed from you yet."
	232: D,
	239: D, // to Bob: "Looping in Dmitri Volkov" — handing it on
	246: D,
	253: R, // to Bob: "Can you send me the logs…?" (the quoted mail was an FYI)
	260: D,
	267: R, // to Bob: "Not this week, sorry: I am on call. Next Tuesday?" — a question back
	274: D, 281: D,
	288: D, // company notice to Ann
}

func TestRoutingMatchesHandLabels(t *testing.T) {
	t.Parallel()
	if len(labels) < 30 {
		t.Fatalf("%d labels", len(labels))
	}
	wrong := 0
	for n, want := range labels {
		d := demoDoc(t, fmt.Sprintf("email/%04d.eml", n))
		got, why := route(d, []string{"bob.smith@kestrel.test"})
		if got != want {
			wrong++
			t.Errorf("%04d %q: %s (%s), labelled %s", n, d.Normalized.Title, got, why, want)
		}
	}
	t.Logf("%d of %d hand-labelled emails routed as labelled", len(labels)-wrong, len(labels))
}

func TestRoutingOtherSources(t *testing.T) {
	t.Parallel()
	page := demoDoc(t, "confluence/ops-98001.json")
	if got, _ := route(page, nil); got != D {
		t.Errorf("a wiki page: %s", got)
	}
	issue := store.Document{SourceType: store.SourceJira, ExternalID: "OPS-9", Normalized: store.Normalized{Title: "OPS-9: x",
		Metadata: map[string]any{"assignee": "bob.smith@kestrel.test", "status": "In Progress"}}}
	if got, why := route(issue, []string{"bob.smith@kestrel.test"}); got != R {
		t.Errorf("open issue assigned to the user: %s (%s)", got, why)
	}
	issue.Normalized.Metadata["status"] = "Done"
	if got, _ := route(issue, []string{"bob.smith@kestrel.test"}); got != D {
		t.Errorf("done issue: %s", got)
	}
	// With no configured users, a request to anyone counts.
	if got, _ := route(demoDoc(t, "email/0071.eml"), nil); got != R {
		t.Errorf("request to anyone without users: %s", got)
	}
}

func TestStructureEmail(t *testing.T) {
	t.Parallel()
	d := demoDoc(t, "email/0002.eml")
	req := structure(d)
	if req.MainNode != "email:"+d.ExternalID || req.SourceType != "EMAIL" || len(req.Relations) < 2 {
		t.Fatalf("%+v", req)
	}
	for _, r := range req.Relations {
		if r.Evidence == "" || !containsLine(req.Header, r.Evidence) {
			t.Errorf("relation %+v has no evidence line in the header", r)
		}
	}
}

func containsLine(content, line string) bool {
	return slices.Contains(strings.Split(content, "\n"), line)
}

// Asked finds, sentence by sentence, what a message asks, of whom and by
// when; quoted lines and links do not count, and a dot inside a word or a
// number does not end a sentence.
func TestAsked(t *testing.T) {
	t.Parallel()
	d := store.Document{SourceType: store.SourceEmail, Normalized: store.Normalized{
		Metadata: map[string]any{"to": []any{"Bob Smith <bob@acme.test>"}, "fromName": "Ann Novak"},
		Body: "Hi Bob,\nv2.1 is out. Can we ship it?\nPlease sign off the release notes by Friday. We must decide on the " +
			"pricing before the 12th!\nSee https://x.test/a?b=1.\n> Could you also review my old mail?\nThanks",
	}}
	got := asked(d)
	want := store.Asks{
		Questions: []string{"Can we ship it?"},
		Requests:  nil,
		Decisions: []string{"Please sign off the release notes by Friday.", "We must decide on the pricing before the 12th!"},
		Deadlines: []string{"by Friday", "before the 12th"},
		Of:        []string{"Bob Smith <bob@acme.test>"},
		From:      "Ann Novak",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("asked:\n got %+v\nwant %+v", got, want)
	}
	jira := store.Document{SourceType: store.SourceJira, Normalized: store.Normalized{
		Metadata: map[string]any{"assignee": "dmitri", "reporter": "carol"}, Body: "Could you look at the flaky test before Monday?"}}
	if a := asked(jira); !slices.Equal(a.Of, []string{"dmitri"}) || a.From != "carol" || len(a.Questions) != 1 || !slices.Equal(a.Deadlines, []string{"before Monday"}) {
		t.Fatalf("jira: %+v", a)
	}
}

// A reply's edges follow In-Reply-To and the chain of ancestors References
// records, so that a thread whose middle message is missing from the corpus
// stays connected: c replies to b (absent), and b to a, by c's header.
func TestStructureReplyChain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		inReplyTo string
		refs      []any
		want      []string
	}{
		{"in-reply-to and references", "b@x", []any{"a@x", "b@x"},
			[]string{"email:c@x|replies_to|email:b@x", "email:b@x|replies_to|email:a@x", "email:c@x|in_thread|email:a@x"}},
		{"references only", "", []any{"a@x", "b@x"},
			[]string{"email:c@x|replies_to|email:b@x", "email:b@x|replies_to|email:a@x", "email:c@x|in_thread|email:a@x"}},
		{"in-reply-to only", "b@x", nil, []string{"email:c@x|replies_to|email:b@x"}},
		{"parent inside references", "b@x", []any{"a@x", "b@x", "z@x"},
			[]string{"email:c@x|replies_to|email:b@x", "email:b@x|replies_to|email:a@x", "email:c@x|in_thread|email:a@x"}},
	} {
		meta := map[string]any{"from": "c@x", "fromName": "C <c@x>"}
		if tc.inReplyTo != "" {
			meta["inReplyTo"] = tc.inReplyTo
		}
		if tc.refs != nil {
			meta["references"] = tc.refs
		}
		req := structure(store.Document{SourceType: store.SourceEmail, ExternalID: "c@x", Normalized: store.Normalized{Title: "Re: x", Body: "ok", Metadata: meta}})
		var got []string
		for _, r := range req.Relations {
			if r.Type != "sent_by" {
				got = append(got, r.From+"|"+r.Type+"|"+r.To)
			}
			if !containsLine(req.Header, r.Evidence) {
				t.Errorf("%s: relation %+v has no evidence line", tc.name, r)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: relations %q, want %q", tc.name, got, tc.want)
		}
		if n := strings.Count(req.Header, "References:"); n > 1 {
			t.Errorf("%s: %d References lines", tc.name, n)
		}
	}
}

// Jira link type names of any spelling become valid edge types.
func TestStructureJiraLinkTypes(t *testing.T) {
	t.Parallel()
	req := structure(store.Document{SourceType: store.SourceJira, ExternalID: "TIM-2", Normalized: store.Normalized{Title: "TIM-2: x", Metadata: map[string]any{
		"key": "TIM-2", "issueLinks": []any{
			map[string]any{"type": "Gantt: start-finish", "direction": "outward", "phrase": "start is earliest end of", "key": "TIM-3"},
			map[string]any{"type": "Problem/Incident", "direction": "inward", "phrase": "is caused by", "key": "TIM-1"},
		}}}})
	var got []string
	for _, r := range req.Relations {
		got = append(got, r.From+"|"+r.Type+"|"+r.To)
	}
	if !slices.Equal(got, []string{"jira:TIM-2|gantt_start_finish|jira:TIM-3", "jira:TIM-1|problem_incident|jira:TIM-2"}) {
		t.Fatalf("relations %q", got)
	}
}

// A mailer's overlong Message-ID still names a valid node, the same one
// from the message itself and from its replies.
func TestStructureLongMessageID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 600) + "@mail.example.test"
	parent := structure(store.Document{SourceType: store.SourceEmail, ExternalID: long, Normalized: store.Normalized{Title: "x", Metadata: map[string]any{}}})
	reply := structure(store.Document{SourceType: store.SourceEmail, ExternalID: "r@x", Normalized: store.Normalized{Title: "Re: x",
		Metadata: map[string]any{"inReplyTo": long}}})
	if len(reply.Relations) != 1 || reply.Relations[0].To != parent.MainNode {
		t.Fatalf("reply %+v, parent %s", reply.Relations, parent.MainNode)
	}
	if _, err := kb.ParseRef(parent.MainNode); err != nil {
		t.Fatal(err)
	}
}

// Read is Route, Asked and Summary at once (the qualifier's one call): the
// same decision, reason, asks and summary on every hand-labelled email,
// with the user configured and without.
func TestReadIsRouteAskedAndSummary(t *testing.T) {
	t.Parallel()
	for n := range labels {
		d := demoDoc(t, fmt.Sprintf("email/%04d.eml", n))
		shape := registry.Shape(d)
		for _, users := range [][]string{{"bob.smith@kestrel.test"}, nil} {
			decision, reason := rules.Route(shape, d, users)
			want := rules.Reading{Decision: decision, Reason: reason, Asks: rules.Asked(shape, d), Summary: rules.Summary(shape, d, decision, reason)}
			if got := rules.Read(shape, d, users); !reflect.DeepEqual(got, want) {
				t.Errorf("%04d, users %v: Read = %+v, want %+v", n, users, got, want)
			}
		}
	}
}
