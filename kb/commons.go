package kb

import (
	"context"
	"math"
	"sync"

	"github.com/jervis-dev/jervis/kb/embed"
	"github.com/jervis-dev/jervis/kb/rag"
)

// Common directions (embed.CommonRemover): the dominant directions of a
// client's chunk vectors, estimated from a sample of them and removed from
// a query's vector before the vector search. They are estimated again when
// the client's chunks have grown or shrunk by a tenth.
const (
	// commonSamplePerDim and commonMinPerDim: the sample is 20 vectors per
	// dimension (2,000 for GloVe's 100), and a client with fewer than 10
	// chunks per dimension has no directions yet (too few to estimate
	// them; search compares raw vectors).
	commonSamplePerDim = 20
	commonMinPerDim    = 10
)

// commons is what a KB knows of each client's common directions.
type commons struct {
	mu       sync.Mutex
	byClient map[string]commonDirs
}

type commonDirs struct {
	chunks int         // the client's chunks when estimated
	dirs   [][]float64 // unit vectors; none when too few chunks
}

// queryVector returns q, embedded by e, with the client's common
// directions removed (and unit length again), or q itself where e has none
// (a client's own encoder: trained, its vectors need no correction), the
// index cannot sample its vectors or the client has too few.
func (k *KB) queryVector(ctx context.Context, client string, e embed.Embedder, q []float32) ([]float32, error) {
	cr, ok := e.(embed.CommonRemover)
	if !ok || cr.CommonComponents() <= 0 || len(q) == 0 {
		return q, nil
	}
	sampler, ok := k.chunks.For(client).(rag.VectorSampler)
	if !ok {
		return q, nil
	}
	n, err := sampler.VectorCount(ctx)
	if err != nil {
		return nil, err
	}
	k.common.mu.Lock()
	d, known := k.common.byClient[client]
	k.common.mu.Unlock()
	if !known || math.Abs(float64(n-d.chunks)) > 0.1*float64(d.chunks) {
		d = commonDirs{chunks: n}
		if n >= commonMinPerDim*len(q) {
			sample, err := sampler.SampleVectors(ctx, commonSamplePerDim*len(q))
			if err != nil {
				return nil, err
			}
			d.dirs = rag.DominantDirections(sample, len(q), cr.CommonComponents())
		}
		k.common.mu.Lock()
		if k.common.byClient == nil {
			k.common.byClient = map[string]commonDirs{}
		}
		k.common.byClient[client] = d
		k.common.mu.Unlock()
	}
	return rag.RemoveDirections(q, d.dirs), nil
}
