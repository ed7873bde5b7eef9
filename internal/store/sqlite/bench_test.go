package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
)

// BenchmarkIdentityFactSets puts the identity facts of mails in batches
// of 32, as the rules qualifier does: each mail names a dozen of 500
// people (its sender, recipients and those it quotes), two facts each.
// go test ./internal/store/sqlite -run '^$' -bench IdentityFactSets
func BenchmarkIdentityFactSets(b *testing.B) {
	s, err := sqlite.Open(b.Context(), sqlite.Options{Path: filepath.Join(b.TempDir(), sqlite.FileName)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	seen := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i += 32 {
		var sets []store.IdentityFactSet
		for j := i; j < min(b.N, i+32); j++ {
			var facts []store.IdentityFact
			for k := range 12 {
				p := (j*7 + k*41) % 500
				facts = append(facts,
					store.IdentityFact{Ref: fmt.Sprint("person:p", p), Kind: store.FactName, Value: fmt.Sprint("person ", p), Evidence: "From: someone", Seen: seen},
					store.IdentityFact{Ref: fmt.Sprint("person:p", p), Kind: store.FactEmail, Value: fmt.Sprintf("p%d@example.org", p), Evidence: "From: someone", Seen: seen})
			}
			sets = append(sets, store.IdentityFactSet{Client: "acme", Source: fmt.Sprint("mail:m", j), Facts: facts})
		}
		if err := s.PutIdentityFactSets(b.Context(), sets); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mails/s")
}
