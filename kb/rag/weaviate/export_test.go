package weaviate

// SetListMax sets how many objects one listing Get asks for, so that a
// test reaches the bound with a few chunks.
func (s *Store) SetListMax(n int) { s.listMax = n }
