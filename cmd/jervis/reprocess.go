package main

import (
	"context"
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/reprocess"
)

func (a *app) reprocessCommand() *cobra.Command {
	var req reprocess.Request
	var since, until string
	cmd := &cobra.Command{
		Use:   "reprocess --client C [--source-type T] [--since T] [--until T] [--dry-run] [--wipe]",
		Short: "Replay a client's source documents through the indexers and the qualifier",
		Long: `reprocess sends the latest version of each selected source document back to the
indexers, and its finished tasks back to the qualifier, so that a running serve (or the
next one) rebuilds what they produced — under the same node keys, edge keys and chunk
IDs. --wipe deletes the client's knowledge base first (only when replaying all of its
documents). --dry-run counts and changes nothing. The REST API's
POST /admin/v1/reprocess does the same as a job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range []struct {
				flag, v string
				to      **time.Time
			}{{"--since", since, &req.Since}, {"--until", until, &req.Until}} {
				if t.v == "" {
					continue
				}
				at, err := time.Parse(time.RFC3339, t.v)
				if err != nil {
					return fmt.Errorf("%s: %q is not an RFC 3339 time (2026-11-01T00:00:00Z)", t.flag, t.v)
				}
				*t.to = &at
			}
			if err := req.Validate(a.kinds.SourceTypes()...); err != nil {
				return err
			}
			srv, err := a.remote()
			if err != nil {
				return err
			}
			if srv != nil {
				p, err := a.remoteReprocess(cmd.Context(), srv, req)
				if err != nil {
					return err
				}
				a.printReprocess(req, p)
				return nil
			}
			all, err := a.openAll(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer all.Close()
			p, err := a.runReprocess(cmd.Context(), all, req)
			if err != nil {
				return err
			}
			a.printReprocess(req, p)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Client, "client", "", "client whose documents to replay (required)")
	f.StringVar(&req.SourceType, "source-type", "", "only this source type: EMAIL, JIRA, CONFLUENCE, GIT or FILE")
	f.StringSliceVar(&req.DocumentIDs, "document", nil, "only these document IDs")
	f.StringVar(&since, "since", "", "only documents observed at or after this time (RFC 3339)")
	f.StringVar(&until, "until", "", "only documents observed before this time (RFC 3339)")
	f.BoolVar(&req.DryRun, "dry-run", false, "count, change nothing")
	f.BoolVar(&req.Wipe, "wipe", false, "delete the client's knowledge base first")
	return cmd
}

// runReprocess replays req in this process's stores, with a progress bar.
func (a *app) runReprocess(ctx context.Context, all *opened, req reprocess.Request) (reprocess.Progress, error) {
	var bar *progressbar.ProgressBar
	defer func() {
		if bar != nil {
			bar.Finish()
		}
	}()
	return reprocess.Run(ctx, all.Store, all.KB.KB, req, func(p reprocess.Progress) {
		if bar == nil {
			bar = a.progress(p.Selected, "reprocessing")
		}
		bar.Set(p.Processed)
	})
}

func (a *app) printReprocess(req reprocess.Request, p reprocess.Progress) {
	verb := "sent back"
	if req.DryRun {
		verb = "would send back (dry run)"
	}
	fmt.Fprintf(a.stdout, "%s: %d documents selected; %s %d documents to the indexers and %d tasks to the qualifier; %d changed meanwhile and were left", req.Client,
		p.Selected, verb, p.DocumentsReset, p.TasksReset, p.Conflicts)
	if p.Wiped {
		fmt.Fprint(a.stdout, "; knowledge base wiped")
	}
	fmt.Fprintln(a.stdout)
}

// remoteReprocess starts the job on the server and follows it to its end.
func (a *app) remoteReprocess(ctx context.Context, srv *remote, req reprocess.Request) (reprocess.Progress, error) {
	var job api.Job
	if err := srv.do(ctx, "POST", "/admin/v1/reprocess", req, &job); err != nil {
		return reprocess.Progress{}, err
	}
	job, err := a.followJob(ctx, srv, job)
	return job.Progress, err
}

// followJob follows a job on the server to its end: an encoder job's
// training, then any replay, on progress bars.
func (a *app) followJob(ctx context.Context, srv *remote, job api.Job) (api.Job, error) {
	var training, replay *progressbar.ProgressBar
	defer func() {
		for _, bar := range []*progressbar.ProgressBar{training, replay} {
			if bar != nil {
				bar.Finish()
			}
		}
	}()
	for {
		if e := job.Encoder; e != nil && e.Epochs > 0 {
			if training == nil {
				training = a.progress(e.Epochs, "training the encoder on the server (epochs)")
			}
			training.Set(e.Epoch)
		}
		if job.Progress.Selected > 0 {
			if replay == nil {
				replay = a.progress(job.Progress.Selected, "reprocessing on the server")
			}
			replay.Set(job.Progress.Processed)
		}
		switch job.State {
		case api.JobDone:
			return job, nil
		case api.JobFailed:
			return job, fmt.Errorf("job %s failed: %s", job.ID, job.Error)
		}
		select {
		case <-ctx.Done():
			return job, fmt.Errorf("stopped following job %s (it goes on on the server): %w", job.ID, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		if err := srv.do(ctx, "GET", "/admin/v1/jobs/"+job.ID, nil, &job); err != nil {
			return job, err
		}
	}
}
