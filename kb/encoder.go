package kb

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embed"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
)

// A client's own encoder (kb/embed/corpus) replaces the KB's embedder for
// its texts once trained (TrainEncoder): its queries at once, its chunks as
// they are written. Every process of a deployment reads it from the
// pipeline store (Config.Encoders) and asks at most once an encoderCheck
// whether it changed.
const encoderCheck = time.Second

// encoderBodyBytes is how much of a document's body an encoder is trained
// on (the beginning: what an item is about comes first).
const encoderBodyBytes = 20_000

// encoders is what a KB knows of its clients' encoders.
type encoders struct {
	mu       sync.Mutex
	byClient map[string]*clientEncoder
}

type clientEncoder struct {
	name    string        // "": none, the KB's embedder
	model   *corpus.Model // nil: none (or unreadable: broken)
	broken  error         // why the stored encoder could not be read
	checked time.Time
}

// embedderFor returns the embedder of client's vectors: its own encoder
// when it has one, else the KB's.
func (k *KB) embedderFor(ctx context.Context, client string) (embed.Embedder, error) {
	if k.encoderStore == nil {
		return k.embedder, nil
	}
	k.enc.mu.Lock()
	ce := k.enc.byClient[client]
	k.enc.mu.Unlock()
	if ce != nil && time.Since(ce.checked) < encoderCheck {
		return ce.embedder(k.embedder), nil
	}
	name, err := k.encoderStore.EncoderName(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("the client's encoder: %w", err)
	}
	next := &clientEncoder{name: name, checked: time.Now()}
	if ce != nil && ce.name == name {
		next.model, next.broken = ce.model, ce.broken
	} else if name != "" {
		e, err := k.encoderStore.GetEncoder(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("the client's encoder: %w", err)
		}
		next.name = e.Name // retrained between the two reads: this one, asked again in a second
		if next.model, err = corpus.Load(e.Model); err != nil {
			// A model this binary cannot read (damaged, or written by a
			// newer jervis) must not stop the client's ingests and
			// searches: they go on with the KB's embedder, as before the
			// client had one, until it is trained again.
			next.model, next.broken = nil, err
			msg := "the client's encoder cannot be read: its texts are embedded with the default embedder until it is trained again (the encoder schedule does; POST /admin/v1/clients/{client}/encoder)"
			if errors.Is(err, corpus.ErrNewer) {
				msg = "the client's encoder was written by a newer jervis: this process embeds its texts with the default embedder; run the newer jervis here too"
			}
			k.log.Error(msg, "client", client, "encoder", e.Name, "err", err)
		}
	}
	k.setEncoder(client, next)
	return next.embedder(k.embedder), nil
}

// EncoderUnreadable says why client's stored encoder cannot be read by
// this KB (nil: it can, or the client has none), reading it from the store
// when it changed since this KB last did. err: the store could not be read.
// A model of a later format (corpus.ErrNewer) is not damaged: a newer
// process of the deployment reads it.
func (k *KB) EncoderUnreadable(ctx context.Context, client string) (unreadable, err error) {
	if _, err := k.embedderFor(ctx, client); err != nil {
		return nil, err
	}
	k.enc.mu.Lock()
	defer k.enc.mu.Unlock()
	if ce := k.enc.byClient[client]; ce != nil {
		return ce.broken, nil
	}
	return nil, nil
}

func (ce *clientEncoder) embedder(fallback embed.Embedder) embed.Embedder {
	if ce.model == nil {
		return fallback
	}
	return ce.model
}

func (k *KB) setEncoder(client string, ce *clientEncoder) {
	k.enc.mu.Lock()
	defer k.enc.mu.Unlock()
	if k.enc.byClient == nil {
		k.enc.byClient = map[string]*clientEncoder{}
	}
	k.enc.byClient[client] = ce
}

// DocumentLister lists source documents (store.Documents does).
type DocumentLister = store.DocumentLister

// EncoderOptions tune TrainEncoder.
type EncoderOptions struct {
	corpus.Options
	// Except leaves these documents out of the training (by ID): a
	// measurement's held-out queries (FitEncoder).
	Except map[string]bool
	// Replay marks the stored encoder's replay pending
	// (store.Encoder.ReplayPending): the caller replays the client's
	// documents next and clears the mark when that has finished
	// (store.Encoders.EncoderReplayed).
	Replay bool
	// Documents is recorded with the stored encoder (store.Encoder.Documents).
	Documents int
}

// TrainEncoder trains client's own encoder on its documents — the latest
// version of each item, its title the query side and its body the passage
// side (corpus.Train; a sample of Options.MaxPairs of them when there are
// more) —, stores it and embeds the client's texts with it from then on:
// its queries at once, its chunks as they are written. The chunks written
// before keep the vectors of the embedder they were written with until the
// client's documents are replayed (a reprocess, which rewrites every chunk: the caller
// starts it); until then its vector search compares unlike vectors.
// The vectors' dimension is the KB embedder's, so that a chunk store that
// fixes it takes both. corpus.ErrTooFew: the client has too few documents.
func (k *KB) TrainEncoder(ctx context.Context, client string, docs DocumentLister, o EncoderOptions) (store.Encoder, error) {
	if k.encoderStore == nil {
		return store.Encoder{}, fmt.Errorf("%w: this knowledge base keeps no encoders", store.ErrInvalid)
	}
	m, items, err := k.FitEncoder(ctx, client, docs, o)
	if err != nil {
		return store.Encoder{}, err
	}
	raw, err := m.MarshalBinary()
	if err != nil {
		return store.Encoder{}, err
	}
	e := store.Encoder{Client: client, Name: m.Model(), Model: raw, Items: items, TrainedAt: time.Now().UTC(), ReplayPending: o.Replay, Documents: o.Documents}
	if err := k.encoderStore.PutEncoder(ctx, e); err != nil {
		return store.Encoder{}, fmt.Errorf("store the encoder: %w", err)
	}
	k.setEncoder(client, &clientEncoder{name: e.Name, model: m, checked: time.Now()})
	return e, nil
}

// FitEncoder trains an encoder as TrainEncoder does and returns it with the
// number of documents it was trained on, storing nothing (a measurement's:
// o.Except leaves its queries' documents out).
func (k *KB) FitEncoder(ctx context.Context, client string, docs DocumentLister, o EncoderOptions) (*corpus.Model, int, error) {
	if err := store.ValidateClientID(client); err != nil {
		return nil, 0, err
	}
	if o.Dim == 0 {
		if o.Dim = k.embedder.Dimension(); o.Dim == 0 { // a server's model, not asked yet
			v, err := k.embedder.Embed(ctx, []string{"dimension"})
			if err != nil {
				return nil, 0, fmt.Errorf("the embedder's dimension: %w", err)
			}
			o.Dim = len(v[0])
		}
	}
	pairs, err := encoderPairs(ctx, client, docs, o)
	if err != nil {
		return nil, 0, err
	}
	m, err := corpus.Train(ctx, pairs, o.Options)
	return m, len(pairs), err
}

// encoderPairs reads the latest version of each of client's items (the
// highest, as a replay chooses it) as a title and the beginning of its
// body, in one pass over the listing: o.MaxPairs items at most, those
// whose source URNs hash lowest — a sample that depends neither on the
// listing's order nor on an item's versions, so that only the sample's
// texts are kept. An item whose latest version o.Except names is left out
// after the sampling.
func encoderPairs(ctx context.Context, client string, docs DocumentLister, o EncoderOptions) ([]corpus.Pair, error) {
	maxPairs := cmp.Or(o.MaxPairs, 50_000)
	type latest struct {
		version int
		id      string
		pair    corpus.Pair
	}
	sample := map[string]*latest{} // by item
	var keys itemHeap              // the sample's items, the highest key on top
	err := store.EachDocument(ctx, docs, store.DocumentQuery{Client: client}, func(d store.Document) {
		item := d.SourceURN()
		if l, ok := sample[item]; ok {
			if d.Version > l.version {
				*l = latest{d.Version, d.ID, encoderPair(d)}
			}
			return
		}
		h := fnv.New64a()
		h.Write([]byte(item))
		k := itemKey{h.Sum64(), item}
		if len(keys) == maxPairs {
			if !k.less(keys[0]) {
				return // and so are its other versions: the top only falls
			}
			delete(sample, heap.Pop(&keys).(itemKey).item)
		}
		heap.Push(&keys, k)
		sample[item] = &latest{d.Version, d.ID, encoderPair(d)}
	})
	if err != nil {
		return nil, fmt.Errorf("list the client's documents: %w", err)
	}
	pairs := make([]corpus.Pair, 0, len(sample))
	for _, l := range sample {
		if !o.Except[l.id] {
			pairs = append(pairs, l.pair)
		}
	}
	return pairs, nil
}

// encoderPair is a document's title and the beginning of its body.
func encoderPair(d store.Document) corpus.Pair {
	body := d.Normalized.Body
	if len(body) > encoderBodyBytes {
		body = body[:encoderBodyBytes]
	}
	return corpus.Pair{Title: d.Normalized.Title, Body: body}
}

// itemKey is an item in the encoder's sample by the hash of its source URN
// (ties by the URN).
type itemKey struct {
	key  uint64
	item string
}

func (a itemKey) less(b itemKey) bool {
	return a.key < b.key || a.key == b.key && a.item < b.item
}

// itemHeap is a max-heap of item keys: its top is the first to leave the
// sample when a lower key comes.
type itemHeap []itemKey

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[j].less(h[i]) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(itemKey)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
