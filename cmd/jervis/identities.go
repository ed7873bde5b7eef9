package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/kb"
)

func (a *app) identitiesCommand() *cobra.Command {
	var (
		client         string
		review, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "identities --client C [--review] [--json]",
		Short: "Print who is who: the people identity resolution made of a client's person refs, and what it left for review",
		Long: `identities resolves a client's identities from what its sources say (addresses, accounts,
names: the facts its documents carry) and the decisions operators made (POST
/admin/v1/clients/{client}/merges and /splits), as the running qualifier does, and prints each
alias with its canonical ref, the rule that joined them and its confidence. It writes nothing.

--review prints the ambiguous candidates instead: names that several people with an address, or
several accounts, answer to. Nothing of them was merged; a merge or a split decides.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.server != "" {
				return errors.New("identities reads the local store (--data); over the API, GET /api/v1/nodes/{key}/aliases shows one person")
			}
			if client == "" {
				return errors.New("--client is required")
			}
			st, err := a.openStore(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer st.Close()
			res, decisions, err := kb.ResolveStoredIdentities(cmd.Context(), st, client)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(res)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "client %s: %d person refs → %d people; %d aliases %v; %d ambiguous; %d decisions\n\n",
				client, res.Refs, res.Persons, len(res.Aliases), res.ByStage, len(res.Ambiguous), len(decisions))
			if review {
				if len(res.Ambiguous) == 0 {
					fmt.Fprintln(tw, "nothing to review")
				} else {
					fmt.Fprintln(tw, "NAME\tREFS\tCANDIDATES\tWHY")
				}
				for _, x := range res.Ambiguous {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Name, strings.Join(x.Refs, " "), strings.Join(x.Candidates, " "), x.Reason)
				}
				return tw.Flush()
			}
			fmt.Fprintln(tw, "ALIAS\tCANONICAL\tSTAGE\tCONFIDENCE")
			for _, al := range res.Aliases {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\n", al.Alias, al.Canonical, al.Stage, al.Confidence)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&client, "client", "", "client whose identities to print (required)")
	f.BoolVar(&review, "review", false, "print the ambiguous candidates left for review")
	f.BoolVar(&asJSON, "json", false, "print the whole resolution as JSON")
	return cmd
}
