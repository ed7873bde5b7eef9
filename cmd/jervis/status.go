package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
)

func (a *app) statusCommand() *cobra.Command {
	var asJSON, quarantined bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print queue depths per state, per source and per client, read from the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, err := a.remote()
			if err != nil {
				return err
			}
			if srv != nil {
				if quarantined {
					return errors.New("--quarantined reads the local store; over --server use GET /api/v1/documents?state=QUARANTINED (and ?degraded=true) with a client's key")
				}
				var stats api.Stats
				if err := srv.do(cmd.Context(), "GET", "/admin/v1/stats", nil, &stats); err != nil {
					return err
				}
				return a.printStatus(stats, asJSON)
			}
			st, err := a.openStore(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer st.Close()
			backends := api.Backends(cmd.Context(), 2*time.Second, append(a.backendChecks(st, nil), a.networkChecks(cmd.Context())...))
			if quarantined {
				return a.printQuarantined(cmd.Context(), st, asJSON)
			}
			stats, err := st.Stats(cmd.Context())
			if err != nil {
				return err
			}
			stats.Backends = backends
			encs, err := st.ListEncoders(cmd.Context())
			if err != nil {
				return err
			}
			statuses, err := api.EncoderStatuses(cmd.Context(), encs, func(ctx context.Context, client string) (error, error) {
				e, err := st.GetEncoder(ctx, client)
				if err != nil {
					return nil, err
				}
				_, why := corpus.Load(e.Model)
				return why, nil
			})
			if err != nil {
				return err
			}
			return a.printStatus(api.Stats{Stats: stats, Encoders: statuses}, asJSON)
		},
	}
	cmd.Flags().BoolVar(&quarantined, "quarantined", false, "list quarantined documents with their reasons, and documents kept with warnings, instead")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object: {"documents":{"NEW":0,...},"tasks":{"DONE":0,...},...}`)
	return cmd
}

// printQuarantined lists the quarantined documents with their reasons, then
// the degraded ones (indexed, with the parser's warnings).
func (a *app) printQuarantined(ctx context.Context, st store.Store, asJSON bool) error {
	docs, err := st.ListDocuments(ctx, store.DocumentQuery{State: store.DocQuarantined, Limit: 1000})
	if err != nil {
		return err
	}
	degraded, err := st.ListDocuments(ctx, store.DocumentQuery{Degraded: true, Limit: 1000})
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(a.stdout).Encode(map[string][]store.Document{"quarantined": docs, "degraded": degraded})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tSOURCE\tEXTERNAL ID\tVERSION\tREASON")
	for _, d := range docs {
		reason := ""
		if d.Error != nil {
			reason = d.Error.Class + ": " + d.Error.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", d.Client, d.SourceType, d.ExternalID, d.Version, reason)
	}
	if len(degraded) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "KEPT WITH WARNINGS\tSOURCE\tEXTERNAL ID\tVERSION\tWARNING")
		for _, d := range degraded {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", d.Client, d.SourceType, d.ExternalID, d.Version, strings.Join(d.Normalized.Warnings, "; "))
		}
	}
	return tw.Flush()
}

func (a *app) printStatus(stats api.Stats, asJSON bool) error {
	if asJSON {
		return a.printJSON(stats)
	}
	return printStats(a.stdout, stats.Stats, stats.Encoders)
}

// networkChecks are the checks of the configured backends that are
// servers (ArangoDB, Weaviate, Ollama), built from the configuration alone:
// jervis status reports them without opening the knowledge base.
func (a *app) networkChecks(ctx context.Context) []api.Check {
	b, err := a.serverBackends(ctx)
	if err != nil {
		name := "config:" + a.cfg.RAG.Backend + "," + a.cfg.Embedder.Backend
		if strings.HasPrefix(err.Error(), "graph.arango") {
			name = "graph:arango"
		}
		return []api.Check{{Name: name, Ping: func(context.Context) error { return err }}}
	}
	var checks []api.Check
	if b.Graph != nil {
		checks = append(checks, api.Check{Name: "graph:arango", Ping: b.Graph.Ping})
	}
	if b.Chunks != nil {
		checks = append(checks, api.Check{Name: "chunks:" + a.cfg.RAG.Backend, Ping: b.Chunks.Ping})
	}
	if b.Embedder != nil {
		checks = append(checks, a.embedderCheck(b.Embedder))
	}
	return checks
}

// printStats writes stats as aligned tables, states in pipeline order.
func printStats(w io.Writer, s store.Stats, encs []api.EncoderStatus) error {
	docStates := states(store.DocumentStates)
	taskStates := states(store.TaskStates)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw, "DOCUMENTS", docStates, map[string]store.Counts{"all": s.Documents}, s.DocumentsBySource, s.DocumentsByClient)
	fmt.Fprintln(tw)
	table(tw, "TASKS", taskStates, map[string]store.Counts{"all": s.Tasks}, s.TasksByKind, s.TasksByClient)
	if len(s.OldestWaiting) > 0 || len(s.Failures) > 0 || s.Degraded > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "QUEUE\tOLDEST WAITING / FAILED")
		for _, k := range slices.Sorted(maps.Keys(s.OldestWaiting)) {
			fmt.Fprintf(tw, "%s\t%s\n", k, time.Since(s.OldestWaiting[k]).Round(time.Second))
		}
		for _, k := range slices.Sorted(maps.Keys(s.Failures)) {
			fmt.Fprintf(tw, "%s\t%d failed\n", k, s.Failures[k])
		}
		if s.Degraded > 0 {
			fmt.Fprintf(tw, "documents kept with warnings\t%d (jervis status --quarantined)\n", s.Degraded)
		}
	}
	if len(s.Backends) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "BACKEND\tROLE\tSTATUS")
		for _, b := range s.Backends {
			status := "ok"
			if !b.OK {
				status = "DOWN: " + b.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Backend, b.Role, status)
		}
	}
	if len(encs) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "ENCODER\tCLIENT\tTRAINED\tITEMS\tDOCUMENTS THEN\tREPLAY\tMODEL")
		for _, e := range encs {
			replay, model := "done", "ok"
			if e.ReplayPending {
				replay = "pending"
			}
			if e.Unreadable != "" {
				model = "UNREADABLE (the default embedder is used): " + e.Unreadable
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", e.Name, e.Client, e.TrainedAt.UTC().Format(time.RFC3339), e.Items, e.Documents, replay, model)
		}
	}
	if len(s.ModelUsage) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "MODEL USAGE	TASKS	CALLS	CALLS/TASK	PROMPT TOKENS	OUTPUT TOKENS")
		for _, k := range slices.Sorted(maps.Keys(s.ModelUsage)) {
			u := s.ModelUsage[k]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%d\t%d\n", k, u.Tasks, u.ModelCalls, u.CallsPerTask(), u.PromptTokens, u.OutputTokens)
		}
	}
	return tw.Flush()
}

func table(w io.Writer, title string, cols []string, groups ...map[string]store.Counts) {
	fmt.Fprintf(w, "%s\t%s\n", title, strings.Join(cols, "\t"))
	for _, g := range groups {
		keys := make([]string, 0, len(g))
		for k := range g {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			row := make([]string, len(cols))
			for i, c := range cols {
				row[i] = fmt.Sprint(g[k][c])
			}
			fmt.Fprintf(w, "%s\t%s\n", k, strings.Join(row, "\t"))
		}
	}
}

func states[S ~string](xs []S) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
