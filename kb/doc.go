// Package kb is Jervis's knowledge base: it turns source content into an
// evidence-linked graph plus searchable chunks (Ingest), and answers queries
// with an evidence pack (Search).
//
// Refs name nodes as namespace:value and go through three stages: format
// normalisation and canonicalisation (ParseRef), then alias resolution
// through the client's registry (Resolver). Relationship syntax and type:id
// mentions in text are found by ParseRelations; text is cut by Chunk.
//
// Storage is behind the graph (kb/graph) and chunk (kb/rag) interfaces, and
// embeddings behind kb/embed, so the same code runs on the embedded SQLite
// stores and GloVe, or on ArangoDB, Weaviate and Ollama.
package kb
