// Package pipelinetest runs the real indexers and qualifier over a store in
// tests, until the work they can do is done.
package pipelinetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/qualifier"
)

// Drain runs the indexers and the rules qualifier (users: whose requests
// route READY_FOR_GPU) until no document or task waits for them, for two
// minutes at most, then resolves identities once.
func Drain(t testing.TB, st store.Store, k *kb.KB, users []string) {
	t.Helper()
	DrainKinds(t, st, k, nil, users)
}

// DrainKinds is Drain with the source kinds of a registry (nil: the
// built-in ones).
func DrainKinds(t testing.TB, st store.Store, k *kb.KB, kinds *pollers.Registry, users []string) {
	t.Helper()
	DrainWith(t, st, k, qualifier.Config{Kinds: kinds, Users: users})
}

// DrainWith is Drain with the qualifier configured by cfg (its store,
// knowledge base and poll interval set here).
func DrainWith(t testing.TB, st store.Store, k *kb.KB, cfg qualifier.Config) {
	t.Helper()
	links, err := qualifier.LinkTriage(st, cfg.UncertainLinks, cfg.Agent != nil)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := indexers.New(st, indexers.Config{Kinds: cfg.Kinds, PollInterval: 10 * time.Millisecond, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.KB, cfg.PollInterval = st, k, 10*time.Millisecond
	q, err := qualifier.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ix.Run(ctx) })
	wg.Go(func() { q.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s, err := st.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		busy := s.Documents["NEW"] + s.Documents["INDEXING"] + s.Tasks["NEW"] + s.Tasks["RETRY"] + s.Tasks["QUALIFICATION_IN_PROGRESS"]
		if busy == 0 && s.Documents["INDEXED"] > 0 {
			// What the documents said about people, resolved as serve's
			// identity loop does.
			if _, err := qualifier.NewIdentityLoop(st, k, nil).Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("the indexers and the qualifier did not finish in two minutes")
}

// RunUntil runs run until done accepts the store's counts (read every
// 20 ms), then stops it and returns what it returned.
func RunUntil(ctx context.Context, run func(context.Context) error, st interface {
	Stats(context.Context) (store.Stats, error)
}, done func(store.Stats) bool) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- run(runCtx) }()
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			return err
		}
		if done(s) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	return <-result
}
