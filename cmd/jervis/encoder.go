package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
)

func (a *app) encoderCommand() *cobra.Command {
	var client string
	var noReplay bool
	cmd := &cobra.Command{
		Use:   "encoder --client C [--no-replay]",
		Short: "Train a client's own encoder on its documents, then replay them with it",
		Long: `encoder trains the client's own text encoder on its documents — each item's latest
version, its title the query and its body the passage; pure Go, no weights from anywhere
(README: "The client's own encoder") — and stores it in the pipeline store: from then on
every process embeds the client's new chunks and its queries with it instead of the
configured embedder. The client's existing chunks keep their vectors until its documents
are replayed, which this command starts next (a reprocess, without a wipe: a running serve,
or the next one, indexes them again, the client's search finding every item meanwhile)
unless --no-replay; a replay cut short is run again by the next serve (the encoder schedule). Training again replaces the
encoder. The REST API's POST /admin/v1/clients/{client}/encoder does the same as a job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := store.ValidateClientID(client); err != nil {
				return fmt.Errorf("--client: %w", err)
			}
			replay := !noReplay
			srv, err := a.remote()
			if err != nil {
				return err
			}
			if srv != nil {
				var job api.Job
				if err := srv.do(ctx, "POST", "/admin/v1/clients/"+url.PathEscape(client)+"/encoder", api.EncoderRequest{Replay: &replay}, &job); err != nil {
					return err
				}
				if job, err = a.followJob(ctx, srv, job); err != nil {
					return err
				}
				if e := job.Encoder; e != nil && e.Encoder != nil {
					a.printEncoder(*e.Encoder, replay, job.Progress)
				}
				return nil
			}
			all, err := a.openAll(ctx, true)
			if err != nil {
				return err
			}
			defer all.Close()
			bar := a.progress(corpus.DefaultEpochs, "training the encoder (epochs)")
			enc, err := all.KB.TrainEncoder(ctx, client, all.Store, kb.EncoderOptions{Replay: replay, Options: corpus.Options{
				Progress: func(epoch int, _ float64) { bar.Set(epoch + 1) }}})
			bar.Finish()
			if err != nil {
				return err
			}
			var p reprocess.Progress
			if replay {
				if p, err = a.runReprocess(ctx, all, reprocess.Request{Client: client}); err != nil {
					return fmt.Errorf("encoder %s trained and stored; the replay (a serve runs it again): %w", enc.Name, err)
				}
				if err := all.Store.EncoderReplayed(ctx, client, enc.Name); err != nil {
					return fmt.Errorf("encoder %s trained and stored, its replay done; marking it so: %w", enc.Name, err)
				}
			}
			a.printEncoder(enc, replay, p)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&client, "client", "", "client whose encoder to train (required)")
	f.BoolVar(&noReplay, "no-replay", false, "store the encoder, replay nothing (the client's chunks keep their vectors until its documents are next reprocessed)")
	return cmd
}

func (a *app) printEncoder(e store.Encoder, replay bool, p reprocess.Progress) {
	fmt.Fprintf(a.stdout, "%s: encoder %s trained on %d documents", e.Client, e.Name, e.Items)
	if replay {
		fmt.Fprintf(a.stdout, "; %d documents sent back to the indexers to be embedded with it", p.DocumentsReset)
	} else {
		fmt.Fprint(a.stdout, "; nothing replayed: the client's chunks keep their vectors until its documents are next reprocessed")
	}
	fmt.Fprintln(a.stdout)
}
