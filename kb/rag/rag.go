// Package rag stores chunks of text with their vectors and links into the
// graph, and searches them: BM25, vector (cosine) and hybrid.
//
// A Store hands out one Index per client (For), like Weaviate's tenants: an
// Index sees only its client's chunks, and BM25 statistics are per client.
// Backends: sqlite (embedded default), weaviate (production); both pass
// ragtest.Exercise. Hybrid fusion follows Weaviate's: relativeScore (the
// default) scales each result list to 0..1 and mixes them by alpha;
// ranked is reciprocal-rank fusion with k = 60. Alpha 0 is BM25 only and
// alpha 1 vector only.
package rag

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

var (
	// ErrNotFound means no such chunk for this client.
	ErrNotFound = errors.New("not found")
	// ErrInvalid means malformed input; the message names the field.
	ErrInvalid = errors.New("invalid")
)

// Chunk is a passage of a source with its vector and graph links.
type Chunk struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Title is the title of the chunk's item (an issue's summary, a mail's
	// subject), carried by each of its chunks: a search field of its own,
	// weighted above the text.
	Title      string    `json:"title,omitempty"`
	GraphRefs  []string  `json:"graphRefs"`
	SourceURN  string    `json:"sourceUrn"`
	SourceType string    `json:"sourceType,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	NodeKey    string    `json:"nodeKey,omitempty"`
	Timestamp  time.Time `json:"timestamp"`
	Vector     []float32 `json:"-"`
}

// Fusion is how hybrid search merges BM25 and vector results.
type Fusion string

// Fusions.
const (
	RelativeScore Fusion = "relativeScore"
	Ranked        Fusion = "ranked"
)

// Filter narrows a search. Zero fields match everything.
type Filter struct {
	SourceTypes []string
	Kinds       []string
	NodeTypes   []string // a chunk matches when one of its graphRefs has that namespace
	SourceURN   string
	Since       time.Time
	Until       time.Time
}

// Query is one search.
type Query struct {
	Text   string
	Vector []float32
	Alpha  float64 // 0 = BM25 only ... 1 = vector only
	Fusion Fusion  // default RelativeScore
	Limit  int     // default 10, at most MaxLimit
	Filter Filter
	// NoText lets a backend leave hits without their texts (the caller
	// reads those it keeps with Texts): ranking items from a large pool of
	// passages needs the texts of a few. Their titles stay: search ranks
	// every item of the pool by its title too (kb's title agreement).
	NoText bool
}

// MaxLimit caps results per search.
const MaxLimit = 1000

// Normalize checks q and fills its defaults.
func (q *Query) Normalize() error {
	q.Fusion = cmp.Or(q.Fusion, RelativeScore)
	q.Limit = cmp.Or(q.Limit, 10)
	switch {
	case q.Alpha < 0 || q.Alpha > 1:
		return fmt.Errorf("%w: alpha: %v is not 0..1", ErrInvalid, q.Alpha)
	case q.Fusion != RelativeScore && q.Fusion != Ranked:
		return fmt.Errorf("%w: fusion: %q is not %s or %s", ErrInvalid, q.Fusion, RelativeScore, Ranked)
	case q.Limit < 0 || q.Limit > MaxLimit:
		return fmt.Errorf("%w: limit: %d is not 1..%d", ErrInvalid, q.Limit, MaxLimit)
	}
	return nil
}

// Hit is a search result.
type Hit struct {
	Chunk       Chunk   `json:"chunk"`
	Score       float64 `json:"score"`
	BM25Score   float64 `json:"bm25Score,omitempty"`
	VectorScore float64 `json:"vectorScore,omitempty"`
}

// Index is one client's chunks.
type Index interface {
	// Upsert stores chunks, replacing any with the same ID.
	Upsert(ctx context.Context, chunks ...Chunk) error
	// Get returns the chunks with these IDs that exist, in the given order.
	Get(ctx context.Context, ids ...string) ([]Chunk, error)
	// SourceChunkIDs lists the IDs of a source's chunks, sorted.
	SourceChunkIDs(ctx context.Context, sourceURN string) ([]string, error)
	// SourcesChunkIDs lists the IDs of several sources' chunks, each
	// source's sorted, in one read where the backend can (an ingest
	// batch's sources: on Weaviate a request a source was a fifth of an
	// ingest's time). A source without chunks has no entry.
	SourcesChunkIDs(ctx context.Context, sourceURNs []string) (map[string][]string, error)
	// Delete removes chunks by ID and returns how many existed.
	Delete(ctx context.Context, ids ...string) (int, error)
	// DeleteBySource removes a source's chunks.
	DeleteBySource(ctx context.Context, sourceURN string) (int, error)
	// DeleteByNode removes the chunks whose NodeKey is nodeKey.
	DeleteByNode(ctx context.Context, nodeKey string) (int, error)
	// BM25 ranks chunks by keyword relevance to q.Text.
	BM25(ctx context.Context, q Query) ([]Hit, error)
	// NearVector ranks chunks by cosine similarity to q.Vector.
	NearVector(ctx context.Context, q Query) ([]Hit, error)
	// Hybrid fuses BM25 and NearVector by q.Alpha and q.Fusion.
	Hybrid(ctx context.Context, q Query) ([]Hit, error)
	// Count returns how many chunks the client has.
	Count(ctx context.Context) (int, error)
	// Drop deletes every chunk of the client (a rebuild starts from it).
	Drop(ctx context.Context) error
}

// Store holds every client's chunks.
type Store interface {
	For(client string) Index
	Ping(ctx context.Context) error
	Close() error
}

// ValidateChunk checks a chunk before it is stored; dim is the index's
// vector dimension (0 = not fixed yet).
func ValidateChunk(c Chunk, dim int) error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: chunk id: empty", ErrInvalid)
	case strings.TrimSpace(c.Text) == "":
		return fmt.Errorf("%w: chunk %s text: empty", ErrInvalid, c.ID)
	case c.SourceURN == "":
		return fmt.Errorf("%w: chunk %s sourceUrn: empty", ErrInvalid, c.ID)
	case len(c.Vector) == 0:
		return fmt.Errorf("%w: chunk %s vector: empty", ErrInvalid, c.ID)
	case dim > 0 && len(c.Vector) != dim:
		return fmt.Errorf("%w: chunk %s vector: %d dimensions, the index has %d", ErrInvalid, c.ID, len(c.Vector), dim)
	}
	return nil
}

// TextGetter is an Index that can read chunks' texts and titles alone,
// cheaper than Get (which reads the vectors too).
type TextGetter interface {
	// Texts returns the chunks ids that exist, by ID, with their IDs,
	// texts and titles alone.
	Texts(ctx context.Context, ids ...string) (map[string]Chunk, error)
}

// Texts returns the chunks ids of x that exist, by chunk ID, with (at
// least) their IDs, texts and titles.
func Texts(ctx context.Context, x Index, ids ...string) (map[string]Chunk, error) {
	if tg, ok := x.(TextGetter); ok {
		return tg.Texts(ctx, ids...)
	}
	chunks, err := x.Get(ctx, ids...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Chunk, len(chunks))
	for _, c := range chunks {
		out[c.ID] = c
	}
	return out, nil
}

// TermCounter is an Index that knows how many of its chunks hold a word,
// as its keyword search matches the word (stemmed as it stems it).
type TermCounter interface {
	// DocFreqs returns how many of the client's chunks hold each of words
	// (lower-case), and how many chunks the client has.
	DocFreqs(ctx context.Context, words []string) (counts []int, total int, err error)
}

// QuerySpace is a Store told that search takes the k dominant directions of
// a client's vectors out of each query's vector (embed.CommonRemover), so
// that an approximate vector index can be built for queries in that space.
type QuerySpace interface {
	SetCommonComponents(k int)
}

// VectorSampler is an Index that can hand out a sample of its vectors.
type VectorSampler interface {
	// VectorCount is how many chunks (each with a vector) the client has,
	// cheaply: after this process's writes, their count; another
	// process's may show a moment (a second) late.
	VectorCount(ctx context.Context) (int, error)
	// SampleVectors returns up to n of the client's vectors, spread over
	// all of them, the same ones for the same chunks.
	SampleVectors(ctx context.Context, n int) ([][]float32, error)
}

// ExactVectorSearcher is an Index whose NearVector may search a part of
// its vectors (the embedded index's lists, ivf.go, when on) and that
// can also scan every one of them: what the part finds is measured
// against it (jervis bench's vector recall).
type ExactVectorSearcher interface {
	NearVectorExact(ctx context.Context, q Query) ([]Hit, error)
}

// SourceTexter is an Index that can read a source's chunks without their
// vectors and graph refs, cheaper than SourceChunkIDs and Get.
type SourceTexter interface {
	// SourceTexts returns the source's chunks (ID, text, title, kind, source
	// URN), ordered by ID.
	SourceTexts(ctx context.Context, sourceURN string) ([]Chunk, error)
}

// SourceChunks returns the chunks of sourceURN, ordered by ID; their
// vectors and graph refs may be left out.
func SourceChunks(ctx context.Context, x Index, sourceURN string) ([]Chunk, error) {
	if st, ok := x.(SourceTexter); ok {
		return st.SourceTexts(ctx, sourceURN)
	}
	ids, err := x.SourceChunkIDs(ctx, sourceURN)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return x.Get(ctx, ids...)
}

// ValidateClient checks a client ID as the pipeline store does (it names
// tables and tenants); the error wraps ErrInvalid.
func ValidateClient(client string) error {
	if err := store.ValidateClientID(client); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// ValidateBatch checks chunks to store together: each by ValidateChunk,
// all with the first one's vector dimension, which it returns.
func ValidateBatch(chunks []Chunk) (int, error) {
	if len(chunks) == 0 {
		return 0, nil
	}
	dim := len(chunks[0].Vector)
	for _, c := range chunks {
		if err := ValidateChunk(c, dim); err != nil {
			return 0, err
		}
	}
	return dim, nil
}

// Normalize returns v scaled to unit length (zeros stay zeros): cosine
// similarity becomes a dot product.
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out
	}
	inv := float32(1 / math.Sqrt(sum))
	for i, x := range v {
		out[i] = x * inv
	}
	return out
}

// Candidates is how many results each side of a hybrid search retrieves
// before fusion (two per result: a result both sides found counts twice).
func Candidates(limit int) int { return max(2*limit, 50) }

// SideCandidates is how many results one side of a hybrid search whose
// weight is weight (1-alpha for BM25, alpha for vectors) retrieves: all of
// Candidates for a side weighing half or more, fewer in proportion for a
// lighter one (at least 50). A light side's low ranks barely move the
// fused order (with ranked fusion at alpha 0.1, a vector hit the BM25 side
// did not find scores below every one of 400 BM25 hits), and they were
// half of the cost of ranking items from hundreds of passages.
func SideCandidates(limit int, weight float64) int {
	n := Candidates(limit)
	if weight >= 0.5 {
		return n
	}
	return max(50, int(math.Ceil(float64(n)*2*weight)))
}

// Fuse merges BM25 and vector results as Weaviate's hybrid search does and
// returns the best limit hits. Both lists must be best first.
func Fuse(bm25, vector []Hit, alpha float64, fusion Fusion, limit int) []Hit {
	sc, _ := fuseScratches.Get().(*fuseScratch)
	if sc == nil {
		sc = &fuseScratch{merged: map[string]int{}}
	}
	defer fuseScratches.Put(sc)
	hitOf := func(a *fuseAcc) *Hit {
		if a.at >= 0 {
			return &bm25[a.at]
		}
		return &vector[-a.at-1]
	}
	clear(sc.merged)
	merged, accs := sc.merged, sc.accs[:0] // chunk ID → index in accs
	add := func(hits []Hit, weight float64, isVector bool) {
		lo, hi := scoreRange(hits, isVector)
		for rank := range hits {
			h := &hits[rank]
			var s float64
			switch fusion {
			case Ranked:
				s = weight / float64(60+rank) // rank from 0, as Weaviate's FusionRanked
			default:
				raw := h.BM25Score
				if isVector {
					raw = h.VectorScore
				}
				norm := 1.0
				if hi > lo {
					norm = (raw - lo) / (hi - lo)
				}
				s = weight * norm
			}
			i, ok := merged[h.Chunk.ID]
			if !ok {
				at := rank
				if isVector {
					at = -rank - 1
				}
				i = len(accs)
				accs = append(accs, fuseAcc{at: at, bm25Score: h.BM25Score, vecScore: h.VectorScore})
				merged[h.Chunk.ID] = i
			}
			a := &accs[i]
			if isVector {
				a.vec, a.vecScore = s, h.VectorScore
			} else {
				a.bm25, a.bm25Score = s, h.BM25Score
			}
		}
	}
	add(bm25, 1-alpha, false)
	add(vector, alpha, true)
	sc.accs = accs
	slices.SortStableFunc(accs, func(a, b fuseAcc) int {
		if sa, sb := a.bm25+a.vec, b.bm25+b.vec; sa != sb {
			return cmp.Compare(sb, sa)
		}
		return strings.Compare(hitOf(&a).Chunk.ID, hitOf(&b).Chunk.ID)
	})
	out := make([]Hit, min(limit, len(accs)))
	for i := range out {
		a := &accs[i]
		out[i] = *hitOf(a)
		out[i].Score, out[i].BM25Score, out[i].VectorScore = a.bm25+a.vec, a.bm25Score, a.vecScore
	}
	return out
}

// fuseAcc is a hit of either side of a fusion: where it was first found
// (bm25[at], or vector[-at-1]: the hits themselves are copied only for the
// best limit), its share of the fused score from each side and each side's
// own score.
type fuseAcc struct {
	at                  int
	bm25, vec           float64
	bm25Score, vecScore float64
}

// fuseScratch is a fusion's map and entries, reused by the next (a map of
// 480 chunk IDs and its entries were 7 % of what the HTTP benchmark's
// searches allocated at 100,000 chunks).
type fuseScratch struct {
	merged map[string]int
	accs   []fuseAcc
}

var fuseScratches sync.Pool

func scoreRange(hits []Hit, isVector bool) (lo, hi float64) {
	for i, h := range hits {
		s := h.BM25Score
		if isVector {
			s = h.VectorScore
		}
		if i == 0 || s < lo {
			lo = s
		}
		if i == 0 || s > hi {
			hi = s
		}
	}
	return lo, hi
}

// Active reports whether f filters anything out.
func (f Filter) Active() bool {
	return len(f.SourceTypes)+len(f.Kinds)+len(f.NodeTypes) > 0 || f.SourceURN != "" || !f.Since.IsZero() || !f.Until.IsZero()
}

// Matches reports whether c passes f.
func (f Filter) Matches(c Chunk) bool {
	if len(f.SourceTypes) > 0 && !slices.Contains(f.SourceTypes, c.SourceType) ||
		len(f.Kinds) > 0 && !slices.Contains(f.Kinds, c.Kind) ||
		f.SourceURN != "" && c.SourceURN != f.SourceURN ||
		!f.Since.IsZero() && c.Timestamp.Before(f.Since) ||
		!f.Until.IsZero() && !c.Timestamp.Before(f.Until) {
		return false
	}
	if len(f.NodeTypes) == 0 {
		return true
	}
	for _, r := range c.GraphRefs {
		ns, _, _ := strings.Cut(r, ":")
		if slices.Contains(f.NodeTypes, ns) {
			return true
		}
	}
	return false
}

type backgroundKey struct{}

// InBackground marks ctx's searches as work no user waits on (the
// qualifier's similar items): a backend spends no more CPU on one of them
// to return it sooner, as it may for a search a user waits on (the
// embedded store scores a large index's BM25 in parts at once when idle).
func InBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx's searches are marked InBackground.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}
