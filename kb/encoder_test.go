package kb_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
)

// topicItems are n items of each of topics topics whose titles and bodies
// share no word: topic t's titles use its own title words ("tit3x1"), its
// bodies its own body words ("bod3x7") and words every topic uses. No
// general-purpose embedder knows any of them; only an encoder trained on
// the items can join a title to its topic's bodies.
func topicItems(rng *rand.Rand, topics, n int) (titles, bodies []string) {
	for t := range topics {
		for range n {
			titles = append(titles, topicTitle(rng, t))
			var ws []string
			for range 12 {
				ws = append(ws, fmt.Sprintf("bod%dx%d", t, rng.IntN(12)), fmt.Sprintf("common%d", rng.IntN(40)))
			}
			bodies = append(bodies, strings.Join(ws, " "))
		}
	}
	return titles, bodies
}

func topicTitle(rng *rand.Rand, t int) string {
	return fmt.Sprintf("tit%dx%d tit%dx%d tit%dx%d", t, rng.IntN(8), t, rng.IntN(8), t, rng.IntN(8))
}

func TestClientsOwnEncoder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(11, 12))
	titles, bodies := topicItems(rng, 15, 10)
	var docs []store.Document
	for i := range titles {
		body := titles[i] + "\n\n" + bodies[i]
		docs = append(docs, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: fmt.Sprintf("T-%d", i), Raw: []byte(body),
			Normalized: store.Normalized{Title: titles[i], Body: bodies[i]}, ObservedAt: time.Now()})
	}
	if _, err := e.store.PutDocuments(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kb.TrainEncoder(ctx, "globex", e.store, kb.EncoderOptions{}); !errors.Is(err, corpus.ErrTooFew) {
		t.Fatalf("a client with no documents: %v, want corpus.ErrTooFew", err)
	}
	enc, err := e.kb.TrainEncoder(ctx, "acme", e.store, kb.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enc.Items != len(titles) || !strings.HasPrefix(enc.Name, "corpus-") {
		t.Fatalf("trained %s on %d items, want %d", enc.Name, enc.Items, len(titles))
	}
	// Both clients ingest the same items; only acme's are embedded by its
	// encoder.
	ids := map[string][]string{}
	for _, client := range []string{"acme", "globex"} {
		for i := range titles {
			res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: client, MainNode: fmt.Sprintf("jira:t-%d", i), Title: titles[i],
				Content: bodies[i], SourceType: "JIRA", Kind: kb.KindBody})
			if err != nil {
				t.Fatal(err)
			}
			ids[client] = append(ids[client], res.Chunks...)
		}
	}
	a, err := e.chunks.For("acme").Get(ctx, ids["acme"][0])
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.chunks.For("globex").Get(ctx, ids["globex"][0])
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Text != g[0].Text || slices.Equal(a[0].Vector, g[0].Vector) {
		t.Fatalf("acme's and globex's vectors of %q are alike: globex has no encoder", a[0].Text)
	}
	// A new title finds its topic's items by vectors alone, in this KB
	// and in another process's over the same store.
	other := embeddedtest.Open(t, dir)
	for name, k := range map[string]*kb.KB{"this process": e.kb, "another process": other.KB.KB} {
		right, all := 0, 0
		for tp := range 15 {
			pack, err := k.Search(ctx, kb.SearchRequest{Client: "acme", Query: topicTitle(rng, tp), Alpha: new(1.0), NoFeedback: true, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range pack.Items {
				if it.Kind != kb.ItemSource {
					continue
				}
				var i int
				fmt.Sscanf(it.SourceURN, "jira:t-%d", &i)
				all++
				if i/10 == tp {
					right++
				}
			}
		}
		if all == 0 || float64(right)/float64(all) < 0.9 {
			t.Errorf("%s: %d of %d items found by vectors are of the title's topic", name, right, all)
		}
	}
	// A sample of the items, the same whatever the listing's order, less
	// the items left out.
	o := kb.EncoderOptions{Options: corpus.Options{MaxPairs: 120}}
	a2, err := e.kb.TrainEncoder(ctx, "acme", e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := e.kb.TrainEncoder(ctx, "acme", e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Items != 120 || a2.Name != b2.Name || a2.Name == enc.Name {
		t.Errorf("sampled twice: %s on %d items, %s on %d", a2.Name, a2.Items, b2.Name, b2.Items)
	}
	list, err := e.store.ListDocuments(ctx, store.DocumentQuery{Client: "acme", Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	except := map[string]bool{}
	for _, d := range list {
		except[d.ID] = true
	}
	if c, err := e.kb.TrainEncoder(ctx, "acme", e.store, kb.EncoderOptions{Except: except}); err != nil || c.Items != len(titles)-20 {
		t.Errorf("20 items left out: trained on %d (%v), want %d", c.Items, err, len(titles)-20)
	}

	// An item's latest version is its highest, as a replay chooses it, even
	// when an older one was updated since: left out by the latest
	// version's ID, the item is not trained on at all.
	v2 := docs[0]
	v2.Normalized.Body += " bod0x1"
	v2.Raw = append(slices.Clone(v2.Raw), " bod0x1"...)
	v2.ObservedAt = time.Now()
	put, err := e.store.PutDocuments(ctx, []store.Document{v2})
	if err != nil {
		t.Fatal(err)
	}
	// The oldest document waiting, version 1 of T-0, claimed: its update
	// is now the newest.
	claimed, err := e.store.ClaimDocuments(ctx, store.Claim{Owner: "test", Limit: 1, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
	if err != nil || len(claimed) != 1 || claimed[0].ExternalID != "T-0" || claimed[0].Version != 1 {
		t.Fatalf("claimed %+v (%v), want version 1 of T-0", claimed, err)
	}
	if c, err := e.kb.TrainEncoder(ctx, "acme", e.store, kb.EncoderOptions{Except: map[string]bool{put[0].Stored.ID: true}}); err != nil || c.Items != len(titles)-1 {
		t.Errorf("the latest version of one item left out: trained on %d (%v), want %d", c.Items, err, len(titles)-1)
	}
}

// A stored encoder this binary cannot read (damaged, or written by a newer
// jervis) stops neither the client's ingests nor its searches: its texts
// are embedded by the KB's embedder, as another client's, and the KB says
// why, until the encoder is trained again.
func TestUnreadableEncoderFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, t.TempDir())
	ctx := t.Context()
	if err := e.store.PutEncoder(ctx, store.Encoder{Client: "acme", Name: "corpus-0123456789ab", Model: []byte("JVEC\x09 written by a later version"), Items: 150, TrainedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	titles, bodies := topicItems(rng, 15, 10)
	vector := map[string][]float32{}
	for _, client := range []string{"acme", "globex"} {
		res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: client, MainNode: "jira:t-1", Title: titles[0], Content: bodies[0], SourceType: "JIRA", Kind: kb.KindBody})
		if err != nil {
			t.Fatalf("%s's ingest: %v", client, err)
		}
		got, err := e.chunks.For(client).Get(ctx, res.Chunks[0])
		if err != nil {
			t.Fatal(err)
		}
		vector[client] = got[0].Vector
	}
	if !slices.Equal(vector["acme"], vector["globex"]) {
		t.Fatal("acme's chunk is not embedded as globex's: the unreadable encoder was used")
	}
	if why, err := e.kb.EncoderUnreadable(ctx, "acme"); err != nil || !errors.Is(why, corpus.ErrFormat) || errors.Is(why, corpus.ErrNewer) {
		t.Fatalf("why acme's encoder is not used: %v (%v), want corpus.ErrFormat, not ErrNewer", why, err)
	}
	if why, err := e.kb.EncoderUnreadable(ctx, "globex"); why != nil || err != nil {
		t.Fatalf("globex has no encoder, yet: %v, %v", why, err)
	}
	pack, err := e.kb.Search(ctx, kb.SearchRequest{Client: "acme", Query: titles[0], Limit: 5})
	if err != nil || len(pack.Items) == 0 {
		t.Fatalf("acme's search: %d items, %v", len(pack.Items), err)
	}
	// Trained again, the encoder is read and used.
	var docs []store.Document
	for i := range titles {
		docs = append(docs, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: fmt.Sprintf("T-%d", i), Raw: []byte(titles[i]),
			Normalized: store.Normalized{Title: titles[i], Body: bodies[i]}, ObservedAt: time.Now()})
	}
	if _, err := e.store.PutDocuments(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kb.TrainEncoder(ctx, "acme", e.store, kb.EncoderOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := e.kb.Ingest(ctx, kb.IngestRequest{Client: "acme", MainNode: "jira:t-2", Title: titles[0], Content: bodies[0], SourceType: "JIRA", Kind: kb.KindBody})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.chunks.For("acme").Get(ctx, res.Chunks[0])
	if err != nil {
		t.Fatal(err)
	}
	why, err := e.kb.EncoderUnreadable(ctx, "acme")
	if slices.Equal(got[0].Vector, vector["globex"]) || why != nil || err != nil {
		t.Fatalf("after training again: the default embedder's vector (%t), unreadable: %v, %v", slices.Equal(got[0].Vector, vector["globex"]), why, err)
	}
}
