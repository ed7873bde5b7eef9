package kb

import (
	"math"
	"slices"
	"testing"
)

func titled(titles ...string) []Item {
	items := make([]Item, len(titles))
	for i, title := range titles {
		items[i] = Item{Kind: ItemSource, SourceURN: title, Title: title, Score: float64(len(titles) - i)}
	}
	return items
}

func urns(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.SourceURN)
	}
	return out
}

// A title holds the query's words in other forms of the same stems; the
// weight it holds counts over the query's and, for each word the query
// lacks, the query's average word: the shorter of two titles holding the
// same words agrees more. Words weigh as the weigher says.
func TestTitleScores(t *testing.T) {
	for _, c := range []struct {
		query string
		weigh func(string) float64
		title string
		want  float64
	}{
		{"Login token expires", nil, "Login tokens expired", 1},
		{"Login token expires", nil, "LOGIN: token expiring!", 1},
		{"Login token expires", nil, "Login tokens expired after the nightly maintenance window", 3.0 / 7},
		{"Login token expires", nil, "login", 1.0 / 3},
		{"Login token expires", nil, "Session ends", 0},
		{"Login token expires", nil, "", 0},
		{"the gateway and the keystore", keystoreRare, "Keystore rotation", 5.0 / 9},
		{"the gateway and the keystore", keystoreRare, "Gateway timeout", 1.0 / 9},
	} {
		got := titleScores(c.query, titled(c.title), c.weigh)
		if len(got) != 1 || math.Abs(got[0]-c.want) > 1e-12 {
			t.Errorf("%q in %q: %v, want %v", c.query, c.title, got, c.want)
		}
	}
	if got := titleScores("the of and", titled("the of and"), nil); got != nil {
		t.Errorf("a query without telling words: %v", got)
	}
}

func keystoreRare(w string) float64 {
	if w == "keystore" {
		return 5
	}
	return 1
}

// The title ranking fuses with the items' own by rank: an item whose title
// holds the query rises past items that hold none, the best titleKeep stay
// first, and the scores are the fused ranking's, best first.
func TestTitleAgreementFusesTheRankings(t *testing.T) {
	items := titled("A", "B", "C", "D", "E", "Login tokens expired", "F")
	got := titleAgreement("Login token expires", items, nil)
	// 1/(60+6) + 0.5/(60+1) lies between D's 1/64 + 0.5/65 and C's 1/63 + 0.5/64.
	if want := []string{"A", "B", "C", "Login tokens expired", "D", "E", "F"}; !slices.Equal(urns(got), want) {
		t.Fatalf("ranked %q, want %q", urns(got), want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score >= got[i-1].Score {
			t.Fatalf("scores not falling: %d %v, %d %v", i-1, got[i-1].Score, i, got[i].Score)
		}
	}
	// The kept items stay first even when a title below agrees more.
	got = titleAgreement("crash", titled("A", "B", "crash", "crash"), nil)
	if want := []string{"A", "B", "crash", "crash"}; !slices.Equal(urns(got), want) {
		t.Fatalf("ranked %q, want %q", urns(got), want)
	}
	if !slices.Equal(urns(items), []string{"A", "B", "C", "D", "E", "Login tokens expired", "F"}) {
		t.Fatalf("the items given were reordered: %q", urns(items))
	}
}

// Nothing to agree with (no telling word in the query, none in a title),
// or too few items to reorder: the items as they came, with their scores.
func TestTitleAgreementLeavesWhatItCannotRank(t *testing.T) {
	for _, c := range []struct {
		query string
		items []Item
	}{
		{"the of and", titled("a", "b", "c", "the of and", "d")},
		{"login token", titled("a", "b", "login token")},
		{"login token", titled("a", "b", "c", "d", "")},
		{"login token", nil},
	} {
		got := titleAgreement(c.query, slices.Clone(c.items), nil)
		if !slices.EqualFunc(got, c.items, func(a, b Item) bool { return a.SourceURN == b.SourceURN && a.Score == b.Score }) {
			t.Errorf("%q: %q, want them as they came", c.query, urns(got))
		}
	}
}
