package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/rag"
)

func (a *app) similarCommand() *cobra.Command {
	var (
		client, sources string
		limit           int
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "similar --client C [--limit N] [--source-types T,...] [--json] DOCUMENT",
		Short: "Print the items most like a document's, the whole item being the query (GET /api/v1/documents/{id}/similar)",
		Long: `similar searches a client's knowledge base with a whole item: its title's words, then its
body's most repeated words. DOCUMENT is a document ID, or SOURCETYPE:EXTERNALID (JIRA:TIMOB-123,
the latest version; not with --server). Each similar item's score is its similarity, 0..1:
its best passage's score over the document's own best passage's.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 100 {
				return fmt.Errorf("--limit %d is not 1..100", limit)
			}
			srv, err := a.remote()
			if err != nil {
				return err
			}
			var res kb.SimilarResult
			if srv != nil { // the key decides the client
				q := url.Values{"limit": {fmt.Sprint(limit)}}
				if sources != "" {
					q.Set("sourceTypes", sources)
				}
				if err := srv.do(cmd.Context(), "GET", "/api/v1/documents/"+url.PathEscape(args[0])+"/similar?"+q.Encode(), nil, &res); err != nil {
					return err
				}
				return a.printSimilar(res, cmp.Or(client, "the key's client"), asJSON)
			}
			if client == "" {
				return errors.New("--client is required (or --server with a client's key)")
			}
			all, err := a.openAll(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer all.Close()
			doc, err := findDocument(cmd.Context(), all.Store, client, args[0])
			if err != nil {
				return err
			}
			req := kb.SimilarRequest{Client: client, SourceURN: doc.SourceURN(), Title: doc.Normalized.Title, Text: doc.Normalized.Body, Limit: limit}
			if sources != "" {
				req.Filter = rag.Filter{SourceTypes: strings.Split(sources, ",")}
			}
			if res, err = all.Similar(cmd.Context(), req); err != nil {
				return err
			}
			return a.printSimilar(res, client, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&client, "client", "", "client whose knowledge base to search (required without --server)")
	f.IntVar(&limit, "limit", 10, "similar items, 1..100")
	f.StringVar(&sources, "source-types", "", "comma-separated source types the similar items come from (JIRA,EMAIL…); default: all")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// findDocument reads a document by ID, or the latest version of
// SOURCETYPE:EXTERNALID.
func findDocument(ctx context.Context, st store.Store, client, ref string) (store.Document, error) {
	d, err := st.GetDocument(ctx, client, ref)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	src, id, ok := strings.Cut(ref, ":")
	if !ok {
		return d, fmt.Errorf("document %s: not found in client %s (give a document ID or SOURCETYPE:EXTERNALID)", ref, client)
	}
	versions, err := st.ListDocumentVersions(ctx, client, store.SourceType(strings.ToUpper(src)), id)
	if err != nil {
		return d, err
	}
	if len(versions) == 0 {
		return d, fmt.Errorf("document %s: not found in client %s", ref, client)
	}
	return versions[len(versions)-1], nil
}

func (a *app) printSimilar(res kb.SimilarResult, client string, asJSON bool) error {
	if asJSON {
		return a.printJSON(res)
	}
	printSimilar(a.stdout, client, res)
	return nil
}

// printSimilar writes similar items for people.
func printSimilar(w io.Writer, client string, res kb.SimilarResult) {
	fmt.Fprintf(w, "items like %s in %s: %d (%.1f ms)\nquery: %s\n", res.SourceURN, client, len(res.Items), res.Timings["total"], res.Query)
	for i, it := range res.Items {
		printItem(w, i+1, it)
	}
}
