package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/qualifier/linksafety"
)

// ExecutorMonitor is what the executor's load monitor tells (its
// executor.Monitor).
type ExecutorMonitor interface {
	Idle() bool
	InFlight() int
	IdleAfter() time.Duration
	Requests() int64
	Preemptions() int64
}

// ExecutorState is the executor's state as GET /admin/v1/stats reports it.
type ExecutorState struct {
	// Idle: no user request for IdleAfter, so READY_FOR_GPU tasks may run.
	Idle        bool    `json:"idle"`
	IdleAfterS  float64 `json:"idleAfterSeconds"`
	UsersActive int     `json:"usersActive"` // user requests being answered now
	Requests    int64   `json:"requests"`    // user requests seen since start
	Preemptions int64   `json:"preemptions"` // runs a user request cancelled since start
}

// Stats is the pipeline's counts, and the executor's state when this
// process runs it.
type Stats struct {
	store.Stats
	Executor *ExecutorState `json:"executor,omitempty"`
	// Encoders are the clients' own encoders (without their models): when
	// each was trained, on how many items, whether its replay is still
	// pending, and why its model cannot be read when it cannot.
	Encoders []EncoderStatus `json:"encoders,omitempty"`
}

func (s *Server) stats(r *http.Request, _ Principal) (any, error) {
	st, err := s.cfg.Store.Stats(r.Context())
	if err != nil {
		return nil, err
	}
	st.Backends = Backends(r.Context(), 2*time.Second, s.cfg.Checks)
	encs, err := s.cfg.Store.ListEncoders(r.Context())
	if err != nil {
		return nil, err
	}
	var unreadable func(context.Context, string) (error, error)
	if s.cfg.KB != nil {
		unreadable = s.cfg.KB.EncoderUnreadable
	}
	statuses, err := EncoderStatuses(r.Context(), encs, unreadable)
	if err != nil {
		return nil, err
	}
	out := Stats{Stats: st, Encoders: statuses}
	if m := s.cfg.Executor; m != nil {
		out.Executor = &ExecutorState{Idle: m.Idle(), IdleAfterS: m.IdleAfter().Seconds(), UsersActive: m.InFlight(),
			Requests: m.Requests(), Preemptions: m.Preemptions()}
	}
	return out, nil
}

// ClientView is a client as GET /admin/v1/clients lists it.
type ClientView struct {
	store.Client
	// Encoder names the client's own encoder, when one was trained (POST
	// /admin/v1/clients/{client}/encoder).
	Encoder string `json:"encoder,omitempty"`
}

func (s *Server) clients(r *http.Request, _ Principal) (any, error) {
	cs, err := s.cfg.Store.ListClients(r.Context())
	if err != nil {
		return nil, err
	}
	encs, err := s.cfg.Store.ListEncoders(r.Context())
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(encs))
	for _, e := range encs {
		names[e.Client] = e.Name
	}
	out := make([]ClientView, len(cs))
	for i, c := range cs {
		out[i] = ClientView{Client: c, Encoder: names[c.ID]}
	}
	return items(out), nil
}

// CreateClientRequest is the body of POST /admin/v1/clients.
type CreateClientRequest struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Namespaces are the client's own entity types whose type:id mentions
	// in prose become nodes (store.Client.Namespaces).
	Namespaces []string `json:"namespaces,omitempty"`
}

func (s *Server) createClient(r *http.Request, _ Principal) (any, error) {
	var req CreateClientRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := store.ValidateClientID(req.ID); err != nil {
		return nil, invalid("id", err.Error())
	}
	ns, err := store.NormalizeNamespaces(req.Namespaces)
	if err != nil {
		return nil, invalid("namespaces", err.Error())
	}
	c := store.Client{ID: req.ID, Name: req.Name, Namespaces: ns, CreatedAt: time.Now().UTC()}
	created, err := s.cfg.Store.PutClient(r.Context(), c)
	if err != nil {
		return nil, err
	}
	if !created {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "client " + req.ID + " exists"}
	}
	return status{code: http.StatusCreated, body: c}, nil
}

// NamespacesRequest is the body of PUT /admin/v1/clients/{client}/namespaces.
type NamespacesRequest struct {
	Namespaces []string `json:"namespaces"`
}

func (s *Server) setNamespaces(r *http.Request, _ Principal) (any, error) {
	var req NamespacesRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if _, err := store.NormalizeNamespaces(req.Namespaces); err != nil {
		return nil, invalid("namespaces", err.Error())
	}
	c, err := s.cfg.Store.SetClientNamespaces(r.Context(), r.PathValue("client"), req.Namespaces)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("client " + r.PathValue("client"))
	}
	return c, err
}

func (s *Server) existingClient(r *http.Request) (string, error) {
	id := r.PathValue("client")
	cs, err := s.cfg.Store.ListClients(r.Context())
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(cs, func(c store.Client) bool { return c.ID == id }) {
		return "", notFound("client " + id)
	}
	return id, nil
}

func (s *Server) keys(r *http.Request, _ Principal) (any, error) {
	client, err := s.existingClient(r)
	if err != nil {
		return nil, err
	}
	ks, err := s.cfg.Store.ListAPIKeys(r.Context(), client)
	return items(ks), err
}

// CreatedKey is the answer to a key creation: the only time the secret is
// shown.
type CreatedKey struct {
	store.APIKey
	Secret string `json:"secret"`
}

func (s *Server) createKey(r *http.Request, _ Principal) (any, error) {
	client, err := s.existingClient(r)
	if err != nil {
		return nil, err
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	secret, k, err := NewKey(store.RoleClient, client, req.Name)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.CreateAPIKey(r.Context(), k); err != nil {
		return nil, err
	}
	return status{code: http.StatusCreated, body: CreatedKey{APIKey: k, Secret: secret}}, nil
}

func (s *Server) revokeKey(r *http.Request, _ Principal) (any, error) {
	if err := s.cfg.Store.RevokeAPIKey(r.Context(), r.PathValue("id")); err != nil {
		return nil, err
	}
	return status{code: http.StatusNoContent}, nil
}

func (s *Server) linkPatterns(r *http.Request, _ Principal) (any, error) {
	client, err := s.existingClient(r)
	if err != nil {
		return nil, err
	}
	ps, err := s.cfg.Store.ListLinkPatterns(r.Context(), client)
	return items(ps), err
}

// LinkPatternRequest adds or removes one link-safety pattern.
type LinkPatternRequest struct {
	Kind string `json:"kind"` // allow or block
	// Pattern is a host name (it and its subdomains), "*.example.com" (its
	// subdomains only) or an http(s) URL (that scheme, host and port, and
	// the paths under its path): see linksafety.ValidatePattern.
	Pattern string `json:"pattern"`
}

func (s *Server) linkPattern(r *http.Request) (store.LinkPattern, error) {
	client, err := s.existingClient(r)
	if err != nil {
		return store.LinkPattern{}, err
	}
	var req LinkPatternRequest
	if err := decode(r, &req); err != nil {
		return store.LinkPattern{}, err
	}
	return store.LinkPattern{Client: client, Kind: req.Kind, Pattern: req.Pattern}, nil
}

func (s *Server) addLinkPattern(r *http.Request, _ Principal) (any, error) {
	p, err := s.linkPattern(r)
	if err != nil {
		return nil, err
	}
	if err := linksafety.ValidatePattern(p.Pattern); err != nil {
		return nil, invalid("pattern", err.Error())
	}
	if err := s.cfg.Store.AddLinkPattern(r.Context(), p); err != nil {
		return nil, err
	}
	return status{code: http.StatusCreated, body: p}, nil
}

func (s *Server) removeLinkPattern(r *http.Request, _ Principal) (any, error) {
	p, err := s.linkPattern(r)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.RemoveLinkPattern(r.Context(), p.Client, p.Kind, p.Pattern); err != nil {
		return nil, err
	}
	return status{code: http.StatusNoContent}, nil
}

// TaskActionRequest names the client of the task an admin retries or
// cancels (task IDs are per client).
type TaskActionRequest struct {
	Client string `json:"client"`
	Reason string `json:"reason,omitempty"`
}

// taskAction moves a task to state `to` on an admin's word: retry sends a
// finished, failed or cancelled task back to NEW with its attempts reset;
// cancel stops a task that has not finished.
func (s *Server) taskAction(to store.TaskState) handlerFunc {
	return func(r *http.Request, p Principal) (any, error) {
		var req TaskActionRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		if err := store.ValidateClientID(req.Client); err != nil {
			return nil, invalid("client", err.Error())
		}
		t, err := s.cfg.Store.GetTask(r.Context(), req.Client, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if !store.CanTransitionTask(t.State, to) {
			return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf("task is %s: it cannot go to %s", t.State, to)}
		}
		reason := cmp.Or(req.Reason, "admin "+p.KeyID)
		if err := s.cfg.Store.TransitionTasks(r.Context(), []store.TaskTransition{{ID: t.ID, From: t.State, To: to, ResetAttempts: to == store.TaskNew, Reason: reason}}); err != nil {
			return nil, err
		}
		return s.cfg.Store.GetTask(r.Context(), req.Client, t.ID)
	}
}

// pollNow asks for a poll of a connection as soon as it is free (requests
// coalesce); the poll's outcome shows in the connection's events and in
// /admin/v1/stats.
// Connection is a configured connection as GET /admin/v1/connections
// lists it: what it is, never its settings.
type Connection struct {
	ID       string `json:"id"`
	Client   string `json:"client"`
	Type     string `json:"type"`
	Schedule string `json:"schedule,omitempty"`
	// Pollable: this process runs the pollers, so POST …/poll works here.
	Pollable bool `json:"pollable"`
}

func (s *Server) connections(r *http.Request, _ Principal) (any, error) {
	out := make([]Connection, len(s.cfg.Connections))
	for i, c := range s.cfg.Connections {
		c.Pollable = s.cfg.PollNow != nil
		out[i] = c
	}
	return items(out), nil
}

func (s *Server) pollNow(r *http.Request, _ Principal) (any, error) {
	if s.cfg.PollNow == nil {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "this process runs no pollers: ask the one with role pollers"}
	}
	id := r.PathValue("id")
	if err := s.cfg.PollNow(id); errors.Is(err, pollers.ErrUnknownConnection) {
		return nil, notFound("connection " + id)
	} else if err != nil {
		return nil, err
	}
	return status{code: http.StatusAccepted, body: map[string]string{"connection": id, "status": "poll requested"}}, nil
}
