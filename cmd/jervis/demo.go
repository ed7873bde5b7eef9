package main

import (
	"context"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/importer"
)

// loadDemo imports the compiled-in demo corpus into client demo, unless it
// has documents already. The indexers (of this process, or another one on
// the same store) index them.
func (a *app) loadDemo(ctx context.Context, st store.Store) error {
	start := time.Now()
	im := &importer.Importer{Client: importer.DemoClient, Connection: "demo", Kinds: a.kinds, DataDir: a.cfg.DataDir}
	imported, err := im.Demo(ctx, st)
	if err != nil {
		return err
	}
	if !imported {
		a.log.Info("demo corpus already imported", "client", importer.DemoClient)
		return nil
	}
	a.log.Info("demo corpus imported", "client", importer.DemoClient, "documents", im.Summary.Documents, "files", im.Summary.Files,
		"git_documents", im.Summary.Commits, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
