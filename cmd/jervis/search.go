package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/ollama"
	"github.com/jervis-dev/jervis/kb/embedded"
	"github.com/jervis-dev/jervis/kb/graph/arango"
	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

// openKB opens the knowledge base — graph.db in the data directory, the
// chunks (chunks.db there, or Weaviate with rag.backend weaviate) and the
// GloVe embedder — with the alias registry and encoders in st. Closing it
// leaves st open.
func (a *app) openKB(ctx context.Context, st embedded.Registry) (*embedded.KB, error) {
	b, err := a.serverBackends(ctx)
	if err != nil {
		return nil, err
	}
	if b.Chunks != nil {
		if err := b.Chunks.Ping(ctx); err != nil {
			return nil, fmt.Errorf("rag.weaviate.url %s: %w", a.cfg.RAG.Weaviate.URL, err)
		}
	}
	return embedded.OpenKBWith(ctx, a.cfg.DataDir, st, b)
}

// serverBackends builds the configured backends that are servers: ArangoDB
// for the graph (connected, it must answer), Weaviate for the chunks and
// Ollama for the embeddings (not contacted here). The others stay nil: the
// embedded defaults (the chunk store's vector lists as rag.sqlite says).
func (a *app) serverBackends(ctx context.Context) (embedded.Backends, error) {
	b := embedded.Backends{VectorLists: a.cfg.RAG.SQLite.VectorLists, Logger: a.log}
	if a.cfg.Graph.Backend == "arango" {
		c := a.cfg.Graph.Arango
		password, _ := config.LookupEnv("JERVIS_GRAPH_ARANGO_PASSWORD", a.environ)
		ctx, cancel := context.WithTimeout(ctx, c.Timeout)
		defer cancel()
		g, err := arango.Open(ctx, arango.Config{URL: c.URL, Database: c.Database, User: c.User,
			Password: password, Timeout: c.Timeout})
		if err != nil {
			return b, fmt.Errorf("graph.arango.url %s: %w", c.URL, err)
		}
		b.Graph = g
	}
	if a.cfg.Embedder.Backend == "ollama" {
		o := a.cfg.Embedder.Ollama
		e, err := ollama.New(ollama.Config{Host: o.Host, Model: o.Model, Timeout: o.Timeout})
		if err != nil {
			return b, fmt.Errorf("embedder.ollama: %w", err)
		}
		b.Embedder = e
	}
	if a.cfg.RAG.Backend == "weaviate" {
		s, err := openWeaviate(a.cfg.RAG.Weaviate)
		if err != nil {
			return b, err
		}
		b.Chunks = s
	}
	return b, nil
}

// openAll opens the pipeline store (see openStore) and the knowledge base
// over it; closing the result closes both.
func (a *app) openAll(ctx context.Context, mustExist bool) (*opened, error) {
	st, err := a.openStore(ctx, mustExist)
	if err != nil {
		return nil, err
	}
	k, err := a.openKB(ctx, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &opened{Store: st, KB: k}, nil
}

// opened is the configured pipeline store and the knowledge base over it.
type opened struct {
	Store store.Store
	*embedded.KB
}

// Close closes the knowledge base, then the store.
func (o *opened) Close() error { return errors.Join(o.KB.Close(), o.Store.Close()) }

func (a *app) searchCommand() *cobra.Command {
	var (
		req      kb.SearchRequest
		alpha    float64
		expand   int
		fusion   string
		asJSON   bool
		feedback bool
		titles   bool
	)
	cmd := &cobra.Command{
		Use:   `search --client C [flags] "query"`,
		Short: "Search a client's knowledge base and print the evidence pack",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Query = strings.Join(args, " ")
			req.Alpha, req.Expand, req.Fusion, req.NoFeedback, req.NoTitles = &alpha, &expand, rag.Fusion(fusion), !feedback, !titles
			srv, err := a.remote()
			if err != nil {
				return err
			}
			if srv != nil { // the key decides the client
				var pack kb.EvidencePack
				if err := srv.do(cmd.Context(), "POST", "/api/v1/search", map[string]any{"query": req.Query, "alpha": alpha,
					"fusion": fusion, "expand": expand, "limit": req.Limit, "group": req.Group, "feedback": feedback, "titles": titles}, &pack); err != nil {
					return err
				}
				return a.printSearch(pack, cmp.Or(req.Client, "the key's client"), asJSON)
			}
			if req.Client == "" {
				return errors.New("--client is required (or --server with a client's key)")
			}
			all, err := a.openAll(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer all.Close()
			pack, err := all.Search(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printSearch(pack, req.Client, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Client, "client", "", "client whose knowledge base to search (required without --server)")
	f.Float64Var(&alpha, "alpha", kb.DefaultAlpha, "0 = keywords (BM25) only … 1 = vectors only")
	f.StringVar(&fusion, "fusion", string(kb.DefaultFusion), "how to merge keyword and vector hits: ranked or relativeScore")
	f.IntVar(&expand, "expand", kb.DefaultExpand, fmt.Sprintf("graph depth around the hits, 0..%d", kb.MaxExpand))
	f.IntVar(&req.Limit, "limit", 10, "items (passages with --group passage)")
	f.StringVar(&req.Group, "group", kb.GroupItem, "what to rank: item (source items, each with its best passages) or passage")
	f.BoolVar(&feedback, "feedback", true, "also rank items by the best item's own words when it holds the query")
	f.BoolVar(&titles, "titles", true, "also rank items by how much of the query their titles hold")
	f.BoolVar(&asJSON, "json", false, "print the evidence pack as JSON")
	return cmd
}

// printJSON writes v to stdout as indented JSON (every command's --json).
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (a *app) printSearch(pack kb.EvidencePack, client string, asJSON bool) error {
	if asJSON {
		return a.printJSON(pack)
	}
	printPack(a.stdout, client, pack)
	return nil
}

// printPack writes the evidence pack for people.
func printPack(w io.Writer, client string, p kb.EvidencePack) {
	fmt.Fprintf(w, "%q in %s: %s (%.1f ms)\n", p.Query, client, p.Summary, p.Timings["total"])
	if p.Feedback != "" {
		fmt.Fprintf(w, "also ranked by the best item's words: %s\n", p.Feedback)
	}
	section := ""
	n := 0
	for _, it := range p.Items {
		if it.Kind != section {
			section, n = it.Kind, 0
			fmt.Fprintf(w, "\n%s\n", map[string]string{kb.ItemSource: "ITEMS", kb.ItemPassage: "PASSAGES", kb.ItemEntity: "ENTITIES", kb.ItemRelation: "RELATIONS"}[it.Kind])
		}
		n++
		switch it.Kind {
		case kb.ItemSource:
			printItem(w, n, it)
		case kb.ItemPassage:
			fmt.Fprintf(w, "%3d. [%.3f] %s\n     %s\n", n, it.Score, strings.Join(it.NodeKeys, ", "), oneLine(it.Content, 220))
		case kb.ItemEntity:
			fmt.Fprintf(w, "%3d. [%.3f] depth %d  %s\n", n, it.Score, it.Depth, oneLine(it.Content, 160))
		case kb.ItemRelation:
			fmt.Fprintf(w, "%3d. [%.2f %s] %s\n", n, it.Confidence, it.Origin, it.Content)
			for _, ev := range it.Evidence {
				fmt.Fprintf(w, "       evidence: %s\n", oneLine(ev.Text, 160))
			}
		}
	}
}

// printItem writes a source item — its score, source and title — with its
// passages.
func printItem(w io.Writer, n int, it kb.Item) {
	fmt.Fprintf(w, "%3d. [%.3f] %s  %s\n", n, it.Score, it.SourceURN, oneLine(it.Title, 120))
	for _, p := range it.Passages {
		fmt.Fprintf(w, "       [%.3f] %s\n", p.Score, oneLine(p.Text, 200))
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// openWeaviate opens the chunk store of rag.backend weaviate.
func openWeaviate(w config.Weaviate) (*weaviate.Store, error) {
	return weaviate.Open(weaviate.Config{URL: w.URL, Class: w.Class, GRPC: w.GRPC, Timeout: w.Timeout})
}
