package eval

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Truth reads a Jira search response with its own JSON parsing: issues,
// links between them by their outward reading, Duplicate links stripped
// from what the pipeline gets (other links and numbers left as they were).
func TestTruthJira(t *testing.T) {
	t.Parallel()
	tr := NewTruth("Duplicate")
	payload := `{"total": 2, "issues": [
 {"id": "10001", "key": "OPS-1", "fields": {"summary": "Disk full", "description": {"type": "doc", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "On node 7"}]}]},
  "issuelinks": [{"type": {"name": "Duplicate"}, "outwardIssue": {"key": "OPS-2"}}, {"type": {"name": "Gantt: start-finish"}, "inwardIssue": {"key": "OPS-2"}}],
  "comment": {"comments": [{"body": "Cleaned up."}]}, "customfield_1": 12345678901234567890}},
 {"id": "10002", "key": "OPS-2", "fields": {"summary": "No space left on device", "issuelinks": [{"type": {"name": "Duplicate"}, "inwardIssue": {"key": "OPS-1"}}]}}]}`
	if err := tr.File("export/search.json", strings.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	out, stripped := StripLinks([]byte(payload), "duplicate")
	var got struct {
		Issues []struct {
			Fields struct {
				IssueLinks []map[string]any `json:"issuelinks"`
				Custom     json.Number      `json:"customfield_1"`
			} `json:"fields"`
		} `json:"issues"`
	}
	d := json.NewDecoder(strings.NewReader(string(out)))
	d.UseNumber()
	if err := d.Decode(&got); err != nil || !stripped || len(got.Issues) != 2 || len(got.Issues[0].Fields.IssueLinks) != 1 ||
		len(got.Issues[1].Fields.IssueLinks) != 0 || got.Issues[0].Fields.Custom != "12345678901234567890" {
		t.Fatalf("stripped payload %s (%v)", out, err)
	}
	if tr.items[Jira] != 2 || tr.issues["OPS-1"].Text != "Disk full\nOn node 7\nCleaned up." {
		t.Fatalf("issues %+v %q", tr.items, tr.issues["OPS-1"].Text)
	}
	if !tr.links[link{From: "OPS-2", To: "OPS-1", Type: "Gantt: start-finish"}] || len(tr.links) != 1 {
		t.Fatalf("links %v", tr.links)
	}
	if !tr.dups[pair{Duplicate: "OPS-1", Original: "OPS-2"}] || len(tr.dups) != 1 {
		t.Fatalf("duplicates %v", tr.dups)
	}
	if same, stripped := StripLinks([]byte(`{"key":"OPS-3","fields":{"summary":"x"}}`), "Duplicate"); stripped || string(same) != `{"key":"OPS-3","fields":{"summary":"x"}}` {
		t.Fatalf("a payload with nothing to strip changed: %s", same)
	}
}

// Truth splits a mailbox at its separators and reads the threading headers
// itself: folded lines, commas between IDs, a repeated Message-ID counted.
func TestTruthMail(t *testing.T) {
	t.Parallel()
	tr := NewTruth()
	mbox := "From a Mon Jan  1 00:00:00 2024\nMessage-ID: <a@x>\nSubject: one\n\n>From the start, a body line.\n\n" +
		"From b Mon Jan  1 00:00:00 2024\nMessage-Id: <c@x>\nIn-Reply-To: <b@x>\nReferences: <a@x>\n\t,<b@x>\n\nbody\n\n" +
		"From a Mon Jan  1 00:00:00 2024\nMessage-ID: <a@x>\n\nsame id again\n"
	if err := tr.File("list.mbox", strings.NewReader(mbox)); err != nil {
		t.Fatal(err)
	}
	if tr.items[Email] != 3 || tr.repeats[Email] != 1 || len(tr.messages) != 2 {
		t.Fatalf("items %v repeats %v messages %v", tr.items, tr.repeats, tr.messages)
	}
	if m := tr.messages["c@x"]; m.InReplyTo != "b@x" || !slices.Equal(m.References, []string{"a@x", "b@x"}) {
		t.Fatalf("c@x %+v", m)
	}
}

// The peer is textbook BM25: the score of one document for a one-term
// query is idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · len/avglen)).
func TestPeerBM25(t *testing.T) {
	t.Parallel()
	docs := map[string]string{"a": "disk full disk", "b": "network down", "c": "disk quota exceeded on node"}
	ids := []string{"a", "b", "c"}
	p := newPeer(ids, func(id string) string { return docs[id] })
	if got := p.search("Disk!", 10, ""); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("ranking %v", got)
	}
	if got := p.search("disk", 10, "a"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("skip: %v", got)
	}
	avg := (3.0 + 2 + 5) / 3
	idf := math.Log(1 + (3-2+0.5)/(2+0.5))
	want := idf * 2 * (PeerK1 + 1) / (2 + PeerK1*(1-PeerB+PeerB*3/avg))
	scores := map[int]float64{}
	for _, x := range p.postings["disk"] {
		norm := x.tf + PeerK1*(1-PeerB+PeerB*p.lengths[x.doc]/p.avgLen)
		scores[x.doc] = idf * x.tf * (PeerK1 + 1) / norm
	}
	if math.Abs(scores[0]-want) > 1e-12 {
		t.Fatalf("score %v, want %v", scores[0], want)
	}
}

// Citations are keys of the corpus's issues, in any case, and nothing else.
func TestTruthCitations(t *testing.T) {
	t.Parallel()
	tr := NewTruth()
	tr.issues["OPS-1"], tr.issues["OPS-22"] = &issue{Key: "OPS-1"}, &issue{Key: "OPS-22"}
	tr.commits["c1"] = "Merge pull request #4 from x/ops-22-retry\n\nSee OPS-1, UTF-8 and WEB-3."
	tr.commits["c2"] = "Bump deps"
	got := tr.citations()
	if len(got) != 1 || !slices.Equal(got["c1"], []string{"OPS-22", "OPS-1"}) {
		t.Fatalf("citations %v", got)
	}
}

// Confluence pages count by their IDs (REST JSON) or their export titles.
func TestTruthConfluence(t *testing.T) {
	t.Parallel()
	tr := NewTruth()
	for name, content := range map[string]string{
		"space/pages.json":     `{"results":[{"id":"1","type":"page","title":"A"},{"id":"2","type":"page","title":"B"}]}`,
		"space/one.json":       `{"id":"3","type":"page","title":"C","body":{}}`,
		"export/Runbook.xhtml": `<p>x</p>`,
		"notes/readme.md":      `# x`,
	} {
		if err := tr.File(name, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	if tr.items[Confluence] != 4 || tr.items[File] != 1 || tr.items[Jira] != 0 || !tr.ids[Confluence]["3"] {
		t.Fatalf("items %v ids %v", tr.items, tr.ids)
	}
}

// The duplicate floor: the default search at least the peer's recall plus
// the lead, capped at 1.
func TestCheckHoldsTheDuplicateLeadOverThePeer(t *testing.T) {
	for _, c := range []struct {
		jervis, peer float64
		crossed      bool
	}{{0.655, 0.541, false}, {0.62, 0.541, true}, {1, 1, false}, {0.95, 1, true}, {0.641, 0.541, false}} {
		r := &Report{Duplicates: &Duplicates{Pairs: 148, Jervis: Ranking{RecallAt10: c.jervis}, Peer: Ranking{RecallAt10: c.peer}}}
		got := r.Check(DefaultFloors)
		if (len(got) > 0) != c.crossed || c.crossed && !strings.Contains(got[0], "less than the BM25 peer's") {
			t.Errorf("jervis %.3f peer %.3f: %v", c.jervis, c.peer, got)
		}
	}
}

// The vector floor holds where the run trained the client's encoder, and
// only there (GloVe's vectors alone are reported, not held).
func TestCheckHoldsTheEncodersVectors(t *testing.T) {
	for _, c := range []struct {
		encoder string
		vectors float64
		crossed bool
	}{{"corpus-1", 0.642, false}, {"corpus-1", 0.40, true}, {"", 0.23, false}} {
		r := &Report{Cost: Cost{Encoder: c.encoder}, Duplicates: &Duplicates{Pairs: 148, Jervis: Ranking{RecallAt10: 0.8}, Peer: Ranking{RecallAt10: 0.5},
			Parts: []NamedRanking{{Name: vectorsOnly, Ranking: Ranking{RecallAt10: c.vectors}}}}}
		got := r.Check(DefaultFloors)
		if (len(got) > 0) != c.crossed || c.crossed && !strings.Contains(got[0], "vectors alone") {
			t.Errorf("encoder %q, vectors %.3f: %v", c.encoder, c.vectors, got)
		}
	}
}

// mayLink passes on every payload that may hold a link of the types, in
// each shape jiraItems reads, and on what spells a type's name but cannot
// be read.
func TestMayLink(t *testing.T) {
	t.Parallel()
	dup := `{"key":"OPS-1","fields":{"issuelinks":[{"type":{"name":"Blocks"}},{"type":{"name":"DUPLICATE"}}]}}`
	other := `{"key":"OPS-2","fields":{"issuelinks":[{"type":{"name":"Blocks"}}],"description":"a duplicate"}}`
	for payload, want := range map[string]bool{
		dup:                           true,
		other:                         false,
		"[" + other + "," + dup + "]": true,
		"[" + other + "]":             false,
		`{"issues":[` + other + `]}`:  false,
		`{"issues":[` + dup + `]}`:    true,
		` {"issues":[],"fields":` + dup[strings.Index(dup, `{"issuelinks"`):len(dup)-1] + `}`: true,
		`{"key":"OPS-3","fields":{"summary":"x"}}`:                                            false,
		`{"key":"OPS-4","fields":"a Duplicate, not an object"}`:                               true,
		`not JSON: Duplicate`: true,
		`{"key":"OPS-5","fields":{"issuelinks":[{"type":{"name":"\u0044uplicate"}}]}}`: true,
	} {
		if got := mayLink([]byte(payload), []string{"Duplicate"}); got != want {
			t.Errorf("mayLink(%s) = %v, want %v", payload, got, want)
		}
	}
}

// containsASCIIFold agrees with a search of both sides in lower case, on
// texts of few letters (so matches and near misses are many).
func TestContainsASCIIFold(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	letters := "dDuUpP-"
	for range 20_000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		w := make([]byte, 1+r.IntN(3))
		for i := range w {
			w[i] = letters[r.IntN(len(letters))]
		}
		want := bytes.Contains(bytes.ToLower(b), bytes.ToLower(w))
		if got := containsASCIIFold(b, string(w)); got != want {
			t.Fatalf("containsASCIIFold(%q, %q) = %v, want %v", b, w, got, want)
		}
	}
}

// spelled passes what may name a type without spelling it in ASCII.
func TestSpelled(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`{"name":"Blocks"}`:            false,
		`{"name":"DupLicate"}`:         true,
		`{"name":"\u0044uplicate"}`:    true,
		"{\"name\":\"Blocks \u212a\"}": true,
		`{}`:                           false,
	} {
		if got := spelled([]byte(raw), []string{"duplicate"}); got != want {
			t.Errorf("spelled(%s) = %v, want %v", raw, got, want)
		}
	}
}
