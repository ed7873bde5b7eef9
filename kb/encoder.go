package kb

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
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
	model   *corpus.Model // nil: none
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
		next.model = ce.model
	} else if name != "" {
		e, err := k.encoderStore.GetEncoder(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("the client's encoder: %w", err)
		}
		if next.model, err = corpus.Load(e.Model); err != nil {
			return nil, fmt.Errorf("the client's encoder %s: %w", e.Name, err)
		}
		next.name = e.Name // retrained between the two reads: this one, asked again in a second
	}
	k.setEncoder(client, next)
	return next.embedder(k.embedder), nil
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
type DocumentLister interface {
	ListDocuments(ctx context.Context, q store.DocumentQuery) ([]store.Document, error)
}

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
// body: o.MaxPairs of them at most, those whose document IDs hash lowest —
// a sample that does not depend on the listing's order. Two passes over
// the listing: the first keeps each item's latest version and its ID, the
// second reads the texts of the sample alone.
func encoderPairs(ctx context.Context, client string, docs DocumentLister, o EncoderOptions) ([]corpus.Pair, error) {
	type version struct {
		n  int
		id string
	}
	latest := map[string]version{}
	err := eachDocument(ctx, client, docs, func(d store.Document) {
		item := string(d.SourceType) + "\x00" + d.ExternalID
		if v, ok := latest[item]; !ok || d.Version > v.n {
			latest[item] = version{d.Version, d.ID}
		}
	})
	if err != nil {
		return nil, err
	}
	type keyed struct {
		key uint64
		id  string
	}
	var sample []keyed
	for _, v := range latest {
		if !o.Except[v.id] {
			h := fnv.New64a()
			h.Write([]byte(v.id))
			sample = append(sample, keyed{h.Sum64(), v.id})
		}
	}
	slices.SortFunc(sample, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.key, b.key), strings.Compare(a.id, b.id)) })
	chosen := make(map[string]bool, min(len(sample), cmp.Or(o.MaxPairs, 50_000)))
	for _, k := range sample[:min(len(sample), cmp.Or(o.MaxPairs, 50_000))] {
		chosen[k.id] = true
	}
	var pairs []corpus.Pair
	err = eachDocument(ctx, client, docs, func(d store.Document) {
		if chosen[d.ID] {
			delete(chosen, d.ID) // once, whatever the listing does meanwhile
			body := d.Normalized.Body
			if len(body) > encoderBodyBytes {
				body = body[:encoderBodyBytes]
			}
			pairs = append(pairs, corpus.Pair{Title: d.Normalized.Title, Body: body})
		}
	})
	return pairs, err
}

// eachDocument calls fn with each of client's documents, a page of the
// listing at a time.
func eachDocument(ctx context.Context, client string, docs DocumentLister, fn func(store.Document)) error {
	var after *store.Position
	for {
		page, err := docs.ListDocuments(ctx, store.DocumentQuery{Client: client, Limit: 1000, After: after})
		if err != nil {
			return fmt.Errorf("list the client's documents: %w", err)
		}
		for _, d := range page {
			fn(d)
		}
		if len(page) < 1000 {
			return nil
		}
		last := page[len(page)-1]
		after = &store.Position{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
}
