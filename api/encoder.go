package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embed/corpus"
)

// EncoderRequest is the body of POST /admin/v1/clients/{client}/encoder
// (optional).
type EncoderRequest struct {
	// Replay replays the client's documents after the training (a
	// reprocess with wipe), so that every chunk has the encoder's vectors
	// (default true). While it runs, the client's search sees what has
	// been rebuilt so far; without it, vector search compares the
	// encoder's query vectors with the chunks' old ones.
	Replay *bool `json:"replay,omitempty"`
}

// EncoderProgress is an encoder job's training.
type EncoderProgress struct {
	Epoch  int     `json:"epoch"` // epochs done
	Epochs int     `json:"epochs"`
	Loss   float64 `json:"loss,omitempty"` // the last epoch's mean
	// Encoder is the encoder trained, once it is.
	Encoder *store.Encoder `json:"trained,omitempty"`
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
	replay := req.Replay == nil || *req.Replay
	if _, running := s.training.LoadOrStore(client, true); running {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "an encoder job of client " + client + " is running: GET /admin/v1/jobs"}
	}
	// The replay's request, a wipe (its client alone when there is none).
	job := &Job{Kind: "encoder", Encoder: &EncoderProgress{Epochs: corpus.DefaultEpochs}, Request: reprocess.Request{Client: client, Wipe: replay}}
	started := s.startJob(job, func(ctx context.Context, job *Job) error {
		defer s.training.Delete(client)
		o := kb.EncoderOptions{Options: corpus.Options{Progress: func(epoch int, loss float64) {
			s.jobs.update(job.ID, func(j *Job) { j.Encoder.Epoch, j.Encoder.Loss = epoch+1, loss })
		}}}
		enc, err := s.cfg.KB.TrainEncoder(ctx, client, s.cfg.Store, o)
		if errors.Is(err, corpus.ErrTooFew) {
			return fmt.Errorf("%w (the client's documents: titles and bodies)", err)
		}
		if err != nil {
			return err
		}
		s.jobs.update(job.ID, func(j *Job) { j.Encoder.Encoder = &enc })
		s.log.Info("encoder trained", "job", job.ID, "client", client, "encoder", enc.Name, "documents", enc.Items)
		if !replay {
			return nil
		}
		p, err := s.replay(ctx, job.ID, job.Request)
		if err == nil {
			s.log.Info("encoder job done", "job", job.ID, "client", client, "documents", p.Processed)
		}
		return err
	})
	return status{code: http.StatusAccepted, body: started}, nil
}
