// Package benchcorpus writes the deterministic synthetic corpus the search
// benchmarks run on (kb's and the HTTP API's): paragraphs of Zipf-distributed
// English words, mentions of people, and one relationship to a Jira issue
// per document, so that search has a graph to expand into. The same seed
// gives the same corpus, so a corpus kept between runs (JERVIS_BENCH_DIR)
// serves every benchmark.
package benchcorpus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/kb"
)

// ChunksPerDoc is how many chunks one document makes: five paragraphs, each
// long enough (130 to 160 words) that no two are packed into one chunk
// (kb.ChunkTokens), the relationship line packed with the last.
const ChunksPerDoc = 5

// Synth writes the documents.
type Synth struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	words []string
	// ParagraphWords bounds a paragraph's words (default 130 to 160: one
	// chunk each).
	ParagraphWords [2]int
}

// New returns a writer drawing from vocabulary (most frequent first), with
// the words of topical texts mixed in at random ranks past the 500 most
// frequent, so that queries about those texts find something.
func New(vocabulary []string, topical []string) *Synth {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	var words []string
	for _, w := range vocabulary {
		if strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) < 0 {
			seen[w] = true
			words = append(words, w)
		}
	}
	for _, text := range topical {
		for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
			if len(w) > 2 && !seen[w] {
				seen[w] = true
				words = slices.Insert(words, 500+rng.IntN(len(words)-500), w)
			}
		}
	}
	return &Synth{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1)), words: words, ParagraphWords: [2]int{130, 160}}
}

// Doc returns document i of client with the given number of paragraphs.
func (s *Synth) Doc(client string, i, paragraphs int) kb.IngestRequest {
	var b strings.Builder
	for p := range paragraphs {
		if p > 0 {
			b.WriteString("\n\n")
		}
		lo, hi := s.ParagraphWords[0], s.ParagraphWords[1]
		for w := range lo + s.rng.IntN(hi-lo) {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(s.words[s.zipf.Uint64()])
		}
		fmt.Fprintf(&b, ". Ask person:p%d.", s.rng.IntN(2000))
	}
	fmt.Fprintf(&b, "\n\ndoc:%d|RELATES_TO|jira:proj-%d", i, s.rng.IntN(5000))
	return kb.IngestRequest{Client: client, MainNode: fmt.Sprintf("doc:%d", i), Content: b.String(), SourceType: "FILE", Kind: "body"}
}

// Fill ingests five-paragraph documents into client until it has chunks
// chunks. Documents are written in order from the start (the generator is
// sequential) and ingested from where have chunks left off.
func Fill(ctx context.Context, k *kb.KB, s *Synth, client string, have, chunks int) error {
	for i := range chunks / ChunksPerDoc {
		doc := s.Doc(client, i, 5)
		if i < have/ChunksPerDoc {
			continue
		}
		if _, err := k.Ingest(ctx, doc); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
	}
	return nil
}
