package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/reprocess"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

// Aliases is a node's identity: the canonical ref it resolves to, the
// refs that are aliases of it (with the rule, confidence and evidence of
// each), and what the sources say about each of those refs.
type Aliases struct {
	Key       string               `json:"key"`
	Canonical string               `json:"canonical"`
	Aliases   []store.Alias        `json:"aliases"`
	Facts     []store.IdentityFact `json:"facts"`
}

func (s *Server) aliases(r *http.Request, p Principal) (any, error) {
	key := r.PathValue("key")
	ref, err := kb.ParseRef(key)
	if err != nil {
		return nil, invalid("key", err.Error())
	}
	all, err := s.cfg.Store.ListAliases(r.Context(), p.Client)
	if err != nil {
		return nil, err
	}
	out := Aliases{Key: key, Canonical: ref.String(), Aliases: []store.Alias{}, Facts: []store.IdentityFact{}}
	for _, a := range all {
		if a.Alias == out.Canonical {
			out.Canonical = a.Canonical
		}
	}
	refs := []string{out.Canonical}
	for _, a := range all {
		if a.Canonical == out.Canonical {
			out.Aliases = append(out.Aliases, a)
			refs = append(refs, a.Alias)
		}
	}
	facts, err := s.cfg.Store.IdentityFactsOf(r.Context(), p.Client, refs, 200)
	if err != nil {
		return nil, err
	}
	out.Facts = append(out.Facts, facts...)
	if len(out.Aliases) == 0 && len(out.Facts) == 0 {
		if _, err := s.cfg.Graph.For(p.Client).Node(r.Context(), out.Canonical); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// IdentityDecisionRequest is an operator's decision on two refs.
type IdentityDecisionRequest struct {
	A   string `json:"a"`
	B   string `json:"b"`
	Why string `json:"why"`
	// Reprocess, on a split, starts a wipe reprocess of the client (a
	// merged node is separated only by replaying its documents).
	Reprocess bool `json:"reprocess,omitempty"`
}

// IdentityDecisionResult is what a decision changed.
type IdentityDecisionResult struct {
	Decision   store.IdentityDecision `json:"decision"`
	Identities kb.ResolvedIdentities  `json:"identities"`
	// Job is the reprocess a split started (Reprocess), else empty.
	Job string `json:"job,omitempty"`
	// Note says what is left to do.
	Note string `json:"note,omitempty"`
}

// identityDecision records an operator's merge (or split) of two refs
// and resolves the client's identities again at once.
func (s *Server) identityDecision(merge bool) handlerFunc {
	return func(r *http.Request, p Principal) (any, error) {
		client, err := s.existingClient(r)
		if err != nil {
			return nil, err
		}
		var req IdentityDecisionRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		a, errA := kb.ParseRef(req.A)
		b, errB := kb.ParseRef(req.B)
		switch {
		case errA != nil:
			return nil, invalid("a", errA.Error())
		case errB != nil:
			return nil, invalid("b", errB.Error())
		case a == b:
			return nil, invalid("b", "the same ref as a")
		case strings.TrimSpace(req.Why) == "":
			return nil, invalid("why", "required: the decision is kept with who made it and why")
		case req.Reprocess && merge:
			return nil, invalid("reprocess", "only for a split")
		}
		d := store.IdentityDecision{Client: client, A: a.String(), B: b.String(), Merge: merge, Who: "key " + p.KeyID, Why: req.Why, At: time.Now().UTC()}
		if err := s.cfg.Store.PutIdentityDecision(r.Context(), d); err != nil {
			return nil, err
		}
		res, err := s.cfg.KB.ApplyIdentities(r.Context(), client, s.cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("resolve identities: %w", err)
		}
		out := IdentityDecisionResult{Decision: d, Identities: res}
		out.Identities.Aliases, out.Identities.Ambiguous = nil, nil // GET …/nodes/{key}/aliases shows them
		if !merge && len(res.Unaliased) > 0 {
			out.Note = fmt.Sprintf("%d refs are no longer aliases; their edges stay on the merged node until the client's documents are replayed (reprocess with wipe)", len(res.Unaliased))
			if req.Reprocess {
				job, err := s.startReprocess(reprocess.Request{Client: client, Wipe: true})
				if err != nil {
					return nil, err
				}
				out.Job, out.Note = job.ID, "a wipe reprocess separates the merged node: GET /admin/v1/jobs/"+job.ID
			}
		}
		return status{code: http.StatusOK, body: out}, nil
	}
}
