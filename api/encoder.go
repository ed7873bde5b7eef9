package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
)

// EncoderRequest is the body of POST /admin/v1/clients/{client}/encoder
// (optional).
type EncoderRequest struct {
	// Replay replays the client's documents after the training (a
	// reprocess without a wipe), so that every chunk has the encoder's
	// vectors (default true). While it runs, the client's search finds
	// every item, its vector side comparing the encoder's query vectors
	// with the old vectors of the chunks not made again yet; without it,
	// with all of them.
	Replay *bool `json:"replay,omitempty"`
}

// EncoderProgress is an encoder job's training.
type EncoderProgress struct {
	// Reason is why the job runs: asked (POST
	// /admin/v1/clients/{client}/encoder), first (the encoder schedule:
	// the client has enough documents and no encoder), grown (its
	// documents have grown since its encoder was trained) or replay
	// pending (a replay with its encoder did not finish: it runs again,
	// without a training).
	Reason string  `json:"reason"`
	Epoch  int     `json:"epoch"` // epochs done
	Epochs int     `json:"epochs"`
	Loss   float64 `json:"loss,omitempty"` // the last epoch's mean
	// Encoder is the encoder trained, once it is (the one replayed, when
	// the job only replays).
	Encoder *store.Encoder `json:"trained,omitempty"`
}

// Why an encoder job runs (EncoderProgress.Reason).
const (
	EncoderAsked         = "asked"
	EncoderFirst         = "first"
	EncoderGrown         = "grown"
	EncoderReplayPending = "replay pending"
	EncoderUnreadable    = "unreadable"
)

// EncoderStatus is a client's encoder (without its model) as GET
// /admin/v1/stats and jervis status list it.
type EncoderStatus struct {
	store.Encoder
	// Unreadable says why the stored model cannot be read (damaged, or
	// written by a newer jervis): the client's texts are embedded with the
	// default embedder meanwhile. Empty: it can be read.
	Unreadable string `json:"unreadable,omitempty"`
}

// EncoderStatuses returns encs with why each one's model cannot be read,
// as unreadable says (nil: every one readable as far as is known).
func EncoderStatuses(ctx context.Context, encs []store.Encoder, unreadable func(ctx context.Context, client string) (why, err error)) ([]EncoderStatus, error) {
	out := make([]EncoderStatus, len(encs))
	for i, e := range encs {
		out[i].Encoder = e
		if unreadable == nil {
			continue
		}
		why, err := unreadable(ctx, e.Client)
		if err != nil {
			return nil, err
		}
		if why != nil {
			out[i].Unreadable = why.Error()
		}
	}
	return out, nil
}

// trainEncoder starts an encoder job for an existing client: its own
// encoder trained on its documents (kb.KB.TrainEncoder), then, unless the
// request says not to, its documents replayed with it. 202 with the job;
// GET /admin/v1/jobs/{id} follows it. 409 while the client's last one runs.
func (s *Server) trainEncoder(r *http.Request, _ Principal) (any, error) {
	client, err := s.existingClient(r)
	if err != nil {
		return nil, err
	}
	var req EncoderRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return nil, err
		}
	}
	started, ok := s.startEncoderJob(client, EncoderAsked, req.Replay == nil || *req.Replay, nil)
	if !ok {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "an encoder job of client " + client + " is running: GET /admin/v1/jobs"}
	}
	return status{code: http.StatusAccepted, body: started}, nil
}

// startEncoderJob starts client's encoder job: the training (unless
// pending, the stored encoder whose replay is to run again), then, with
// replay, the replay of the client's documents, its encoder's mark cleared when it has
// finished (store.Encoders.EncoderReplayed). It returns false, starting
// nothing, while the client's last one runs in this process.
func (s *Server) startEncoderJob(client, reason string, replay bool, pending *store.Encoder) (Job, bool) {
	if _, running := s.training.LoadOrStore(client, true); running {
		return Job{}, false
	}
	// The replay's request: every document of the client, without a wipe —
	// its search keeps every item while the chunks' vectors are made again
	// (the embedded store's lists are trained again as they are).
	job := &Job{Kind: "encoder", Encoder: &EncoderProgress{Reason: reason, Epochs: corpus.DefaultEpochs}, Request: reprocess.Request{Client: client}}
	if pending != nil {
		job.Encoder.Epochs, job.Encoder.Encoder = 0, pending
	}
	return s.startJob(job, func(ctx context.Context, job *Job) error {
		defer s.training.Delete(client)
		enc := pending
		if enc == nil {
			o := kb.EncoderOptions{Replay: replay, Options: corpus.Options{Progress: func(epoch int, loss float64) {
				s.jobs.update(job.ID, func(j *Job) { j.Encoder.Epoch, j.Encoder.Loss = epoch+1, loss })
			}}}
			// The client's documents now, the schedule's measure of its
			// growth since.
			if st, err := s.cfg.Store.Stats(ctx); err == nil {
				for _, n := range st.DocumentsByClient[client] {
					o.Documents += int(n)
				}
			}
			e, err := s.cfg.KB.TrainEncoder(ctx, client, s.cfg.Store, o)
			if errors.Is(err, corpus.ErrTooFew) {
				return fmt.Errorf("%w (the client's documents: titles and bodies)", err)
			}
			if err != nil {
				return err
			}
			e.Model = nil // the job shows what it is, not the model
			enc = &e
			s.jobs.update(job.ID, func(j *Job) { j.Encoder.Encoder = enc })
			s.log.Info("encoder trained", "job", job.ID, "client", client, "reason", reason, "encoder", e.Name, "documents", e.Items)
		}
		if !replay {
			s.scheduled.Delete(client) // done: the schedule need not wait
			return nil
		}
		p, err := s.replay(ctx, job.ID, job.Request)
		if err != nil {
			return err
		}
		if err := s.cfg.Store.EncoderReplayed(ctx, client, enc.Name); err != nil {
			return fmt.Errorf("the replay has finished, but marking it so failed (it runs again): %w", err)
		}
		replayed := *enc
		replayed.ReplayPending = false
		s.jobs.update(job.ID, func(j *Job) { j.Encoder.Encoder = &replayed })
		s.scheduled.Delete(client)
		s.log.Info("encoder job done", "job", job.ID, "client", client, "reason", reason, "encoder", enc.Name, "documents", p.Processed)
		return nil
	}), true
}

// EncoderSchedule says when the encoder schedule (Server.RunEncoderSchedule)
// starts a client's encoder job without being asked.
type EncoderSchedule struct {
	// MinDocuments is how many documents (every version, in every state) a
	// client needs before its first encoder is trained; 0: never without
	// being asked.
	MinDocuments int
	// Growth retrains a client's encoder once the client has this many
	// times the documents it had when the encoder was trained; 0: never.
	Growth float64
	// Every is how often the clients are looked at.
	Every time.Duration
	// Retry is how long the schedule waits, after it started a job for a
	// client that then failed, before it starts another for the same
	// client: a training that failed (too few titles and bodies) or a
	// replay that did is not tried again at each look.
	Retry time.Duration
}

// RunEncoderSchedule looks at every client each sch.Every until ctx ends.
// A client whose stored encoder cannot be read (damaged; not one a newer
// jervis wrote) gets a job that trains it again and replays its documents.
// A client whose encoder's replay is pending — the process that ran it
// stopped first: the encoder was trained before this schedule started,
// or over replayGrace ago — gets a job that replays its documents again. A client
// whose queues are empty — no document waiting for or held by an indexer,
// no task waiting for or held by the qualifier, so that a bulk import has
// been taken in whole — gets an encoder job (train, replay) when
// it has sch.MinDocuments documents and no encoder, or sch.Growth times
// the documents it had when its encoder was trained. A job already running
// in this process is left to finish, and after a job the schedule started
// failed, the client's next waits sch.Retry from its start. Jobs started so are listed with the
// others (GET /admin/v1/jobs) and logged.
func (s *Server) RunEncoderSchedule(ctx context.Context, sch EncoderSchedule) error {
	since := time.Now()
	t := time.NewTicker(sch.Every)
	defer t.Stop()
	for {
		if err := s.scheduleEncoders(ctx, sch, since); err != nil && ctx.Err() == nil {
			s.log.Warn("encoder schedule: the clients could not be read; trying again", "err", err, "in", sch.Every)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// replayGrace is how long after an encoder was trained, by a process the
// schedule has seen start it (after the schedule's own start), its
// pending replay is left to that process: another process sharing the
// store may be running it.
const replayGrace = 30 * time.Minute

// damagedEncoder says why client's stored encoder cannot be read, when
// training it again is the mend: not when a newer jervis wrote it
// (corpus.ErrNewer), which the deployment's newer processes read.
func (s *Server) damagedEncoder(ctx context.Context, client string) (error, error) {
	if s.cfg.KB == nil {
		return nil, nil
	}
	why, err := s.cfg.KB.EncoderUnreadable(ctx, client)
	if err != nil || errors.Is(why, corpus.ErrNewer) {
		return nil, err
	}
	return why, nil
}

// scheduleEncoders starts the jobs RunEncoderSchedule's one look asks for;
// the schedule started at since.
func (s *Server) scheduleEncoders(ctx context.Context, sch EncoderSchedule, since time.Time) error {
	start := func(client, reason string, pending *store.Encoder) (Job, bool) {
		if last, ok := s.scheduled.Load(client); ok && time.Since(last.(time.Time)) < sch.Retry {
			return Job{}, false
		}
		job, ok := s.startEncoderJob(client, reason, true, pending)
		if ok {
			s.scheduled.Store(client, time.Now())
		}
		return job, ok
	}
	encs, err := s.cfg.Store.ListEncoders(ctx)
	if err != nil {
		return err
	}
	have := make(map[string]store.Encoder, len(encs))
	for _, e := range encs {
		have[e.Client] = e
		if damaged, err := s.damagedEncoder(ctx, e.Client); err != nil {
			return err
		} else if damaged != nil {
			// Whatever its replay: the model is gone, so the client's
			// texts take the default vectors until it is trained again.
			if job, ok := start(e.Client, EncoderUnreadable, nil); ok {
				s.log.Warn("encoder schedule: a client's encoder cannot be read; training it again", "job", job.ID, "client", e.Client, "encoder", e.Name, "err", damaged)
			}
			continue
		}
		if e.ReplayPending && (e.TrainedAt.Before(since) || time.Since(e.TrainedAt) > replayGrace) {
			if job, ok := start(e.Client, EncoderReplayPending, &e); ok {
				s.log.Info("encoder schedule: replaying a client's documents with its encoder again", "job", job.ID, "client", e.Client, "encoder", e.Name)
			}
		}
	}
	if sch.MinDocuments <= 0 {
		return nil
	}
	st, err := s.cfg.Store.Stats(ctx)
	if err != nil {
		return err
	}
	for client, docs := range st.DocumentsByClient {
		tasks := st.TasksByClient[client]
		if docs[string(store.DocNew)]+docs[string(store.DocIndexing)] > 0 ||
			tasks[string(store.TaskNew)]+tasks[string(store.TaskQualifying)]+tasks[string(store.TaskRetry)] > 0 {
			continue // still taking documents in
		}
		var n int64
		for _, c := range docs {
			n += c
		}
		e, ok := have[client]
		reason := ""
		switch {
		case !ok && n >= int64(sch.MinDocuments):
			reason = EncoderFirst
		case ok && !e.ReplayPending && sch.Growth > 0 && float64(n) >= sch.Growth*float64(cmp.Or(e.Documents, e.Items)):
			reason = EncoderGrown
		default:
			continue
		}
		if job, ok := start(client, reason, nil); ok {
			s.log.Info("encoder schedule: training a client's encoder", "job", job.ID, "client", client, "reason", reason, "documents", n)
		}
	}
	return nil
}
