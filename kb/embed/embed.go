// Package embed defines what the knowledge base needs from an embedding
// model. Implementations: glove (embedded default, pure Go) and ollama.
package embed

import "context"

// Embedder turns texts into vectors.
type Embedder interface {
	// Embed returns one vector per text, in order. It must return promptly
	// when ctx is cancelled.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the model; vectors of different models are not comparable.
	Model() string
	// Dimension is the length of the vectors (0 while not yet known).
	Dimension() int
}

// WordWeigher tells how informative a word is in general text: near 1 for
// a rare word, near 0 for the commonest. Search uses it to choose the
// words of an item that say what it is about (feedback), whatever the
// index; glove implements it from its vocabulary's frequency ranks.
type WordWeigher interface {
	// WordWeight weighs word (lower-case); a word the weigher has never
	// seen (a name, an identifier) weighs as its rarest.
	WordWeight(word string) float64
}

// CommonRemover is an Embedder whose vectors share a few dominant
// directions in any one corpus — what every text of it has in common (its
// language, its project's vocabulary) — that say little about what a text
// is about: averaged word vectors do. Search removes that many of the
// client's dominant directions from a query's vector ("all but the top":
// Arora et al.'s common component removal, Mu and Viswanath's
// post-processing), so that a query is compared by what sets it apart.
type CommonRemover interface {
	// CommonComponents is how many dominant directions to remove.
	CommonComponents() int
}
