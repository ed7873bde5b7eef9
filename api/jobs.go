package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/reprocess"
)

// Job is an admin job (a reprocess, or an encoder's training and the
// replay after it) and how far it got.
type Job struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`  // reprocess, encoder
	State string `json:"state"` // running, done, failed
	// Encoder is an encoder job's training (nil for a reprocess).
	Encoder *EncoderProgress `json:"encoder,omitempty"`
	// Request and Progress are the replay's (an encoder job's after its
	// training, when it replays).
	Request    reprocess.Request  `json:"request"`
	Progress   reprocess.Progress `json:"progress"`
	Error      string             `json:"error,omitempty"`
	StartedAt  time.Time          `json:"startedAt"`
	FinishedAt time.Time          `json:"finishedAt,omitzero"`
}

// Job states.
const (
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// jobs keeps the jobs of this process (the newest 100). A job lost with
// its process is safe to start again: a replay is idempotent.
type jobs struct {
	mu   sync.Mutex
	byID map[string]*Job
	ids  []string
	wg   sync.WaitGroup
}

func (j *jobs) add(job *Job) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.byID == nil {
		j.byID = map[string]*Job{}
	}
	j.byID[job.ID] = job
	j.ids = append(j.ids, job.ID)
	for len(j.ids) > 100 {
		if old := j.byID[j.ids[0]]; old.State == JobRunning {
			break
		}
		delete(j.byID, j.ids[0])
		j.ids = j.ids[1:]
	}
}

func (j *jobs) update(id string, f func(*Job)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j.byID[id])
}

func (j *jobs) get(id string) (Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.byID[id]
	if !ok {
		return Job{}, false
	}
	return job.snapshot(), true
}

// snapshot is a copy of the job that its updates (jobs.update, under the
// lock) do not change as it is read.
func (job *Job) snapshot() Job {
	c := *job
	if c.Encoder != nil {
		e := *c.Encoder
		c.Encoder = &e
	}
	return c
}

func (j *jobs) list() []Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Job, 0, len(j.ids))
	for _, id := range slices.Backward(j.ids) {
		out = append(out, j.byID[id].snapshot())
	}
	return out
}

// reprocess starts a replay job (a dry run is one too: it counts) and
// answers 202 with it; GET /admin/v1/jobs/{id} follows its progress.
func (s *Server) reprocess(r *http.Request, _ Principal) (any, error) {
	var req reprocess.Request
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(s.cfg.Kinds.SourceTypes()...); err != nil {
		return nil, err
	}
	job, err := s.startReprocess(req)
	if err != nil {
		return nil, err
	}
	return status{code: http.StatusAccepted, body: job}, nil
}

// startReprocess starts a replay job of a valid request and returns it as
// it starts.
func (s *Server) startReprocess(req reprocess.Request) (Job, error) {
	return s.startJob(&Job{Kind: "reprocess", Request: req}, func(ctx context.Context, job *Job) error {
		p, err := s.replay(ctx, job.ID, req)
		if err == nil {
			s.log.Info("reprocess job done", "job", job.ID, "client", req.Client, "documents", p.Processed, "tasks", p.TasksReset, "dry_run", req.DryRun)
		}
		return err
	}), nil
}

// startJob starts job (its kind and request set) running run in the
// background, and returns it as it starts.
func (s *Server) startJob(job *Job, run func(ctx context.Context, job *Job) error) Job {
	var id [8]byte
	rand.Read(id[:])
	job.ID, job.State, job.StartedAt = "job_"+hex.EncodeToString(id[:]), JobRunning, time.Now().UTC()
	s.jobs.add(job)
	s.jobs.wg.Go(func() {
		err := run(s.cfg.BaseContext, job)
		s.jobs.update(job.ID, func(j *Job) {
			j.State, j.FinishedAt = JobDone, time.Now().UTC()
			if err != nil {
				j.State, j.Error = JobFailed, err.Error()
			}
		})
		if err != nil {
			s.log.Error(job.Kind+" job failed", "job", job.ID, "client", job.Request.Client, "err", err)
		}
	})
	snapshot, _ := s.jobs.get(job.ID)
	return snapshot
}

// replay runs a reprocess for job id, its progress kept in the job.
func (s *Server) replay(ctx context.Context, id string, req reprocess.Request) (reprocess.Progress, error) {
	return reprocess.Run(ctx, s.cfg.Store, s.cfg.KB, req, func(p reprocess.Progress) {
		s.jobs.update(id, func(j *Job) { j.Progress = p })
	})
}

func (s *Server) job(r *http.Request, _ Principal) (any, error) {
	job, ok := s.jobs.get(r.PathValue("id"))
	if !ok {
		return nil, notFound("job")
	}
	return job, nil
}

func (s *Server) jobList(r *http.Request, _ Principal) (any, error) {
	return items(s.jobs.list()), nil
}

// Wait waits for running jobs to end; cancel Config.BaseContext to stop
// them.
func (s *Server) Wait() { s.jobs.wg.Wait() }
