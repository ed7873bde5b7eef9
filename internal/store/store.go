package store

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Default limits applied when a document or task does not set its own.
const (
	DefaultMaxAttempts = 5
)

// Claim describes one claim: who takes the lease, how many items at most,
// the time the claim happens and when the lease runs out.
type Claim struct {
	Owner      string
	Limit      int
	Now        time.Time
	LeaseUntil time.Time
}

// Validate checks the claim's fields.
func (c Claim) Validate() error {
	switch {
	case c.Owner == "":
		return invalid("owner", "required")
	case c.Limit <= 0:
		return invalid("limit", "must be positive")
	case !c.LeaseUntil.After(c.Now):
		return invalid("leaseUntil", "must be after now")
	}
	return nil
}

// DocumentTransition is a compare-and-set of one document's state.
type DocumentTransition struct {
	ID   string
	From DocumentState // the state the caller believes the document is in
	To   DocumentState
	// Owner, when set, must hold the document's lease.
	Owner string
	// RunAfter delays the next claim (a retry's backoff).
	RunAfter time.Time
	// Error is recorded (or cleared when nil) on the document.
	Error *ErrorInfo
	// RefundAttempt gives back the attempt the claim spent (release).
	RefundAttempt bool
	// ResetAttempts starts counting attempts afresh (reprocess).
	ResetAttempts bool
	// Reason is recorded in the event: "retry", "preempted", "admin", ...
	Reason string
}

// TaskTransition is a compare-and-set of one task's state.
type TaskTransition struct {
	ID   string
	From TaskState // the state the caller believes the task is in
	To   TaskState
	// Owner, when set, must hold the task's lease.
	Owner string
	// RunAfter delays the next claim (a retry's backoff).
	RunAfter time.Time
	// Error is recorded as LastError (kept as is when nil).
	Error *ErrorInfo
	// Result is stored with the task when set.
	Result json.RawMessage
	// Usage replaces the task's usage when set.
	Usage *Usage
	// RefundAttempt gives back the attempt the claim spent (preemption).
	RefundAttempt bool
	// ResetAttempts starts counting attempts afresh (admin retry, new stage).
	ResetAttempts bool
	// Reason is recorded in the event.
	Reason string
}

// DocumentQuery selects documents, most recently updated first. Zero
// fields match all.
type DocumentQuery struct {
	Client     string
	State      DocumentState
	SourceType SourceType
	// Degraded selects only documents kept with warnings.
	Degraded bool
	Limit    int // default 100
	// After continues a listing after the last item of the previous page.
	After *Position
}

// Position is a place in a listing ordered by (UpdatedAt descending, ID):
// the last item of a page. Paging by position, not offset, neither skips
// nor repeats items when others are added meanwhile ahead of it.
type Position struct {
	UpdatedAt time.Time `json:"u"`
	ID        string    `json:"i"`
}

// TaskQuery selects tasks, most recently updated first. Zero fields match
// all.
type TaskQuery struct {
	Client    string
	State     TaskState
	Kind      TaskKind
	SourceDoc string // the tasks of one document
	Limit     int    // default 100
	After     *Position
}

// Documents stores source document versions and moves them through indexing.
type Documents interface {
	// ListDocuments returns matching documents (without Raw), most recently
	// updated first.
	ListDocuments(ctx context.Context, q DocumentQuery) ([]Document, error)
	// PutDocument stores doc as a new version in state NEW, computing its ID
	// and version number. Putting content that is already stored is a no-op
	// that returns the stored version and created=false.
	PutDocument(ctx context.Context, doc Document) (stored Document, created bool, err error)
	// GetDocument returns one version of the client's documents.
	GetDocument(ctx context.Context, client, id string) (Document, error)
	// ListDocumentVersions returns every stored version of an external item,
	// oldest first.
	ListDocumentVersions(ctx context.Context, client string, source SourceType, externalID string) ([]Document, error)
	// ClaimDocuments leases up to c.Limit NEW documents whose RunAfter has
	// passed, moving them to INDEXING and counting an attempt.
	ClaimDocuments(ctx context.Context, c Claim) ([]Document, error)
	// ExtendDocumentLeases moves the lease of the owner's documents to until
	// and returns how many it still held.
	ExtendDocumentLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error)
	// TransitionDocuments applies each transition atomically with its
	// event. Transitions that are illegal or stale are skipped and reported
	// in the returned error (errors.Is ErrIllegalTransition / ErrConflict);
	// the others are applied.
	TransitionDocuments(ctx context.Context, ts []DocumentTransition) error
	// RescueDocuments returns INDEXING documents whose lease ran out before
	// now to NEW, or to QUARANTINED when their attempts are spent.
	RescueDocuments(ctx context.Context, now time.Time) (int, error)
}

// Tasks stores pending tasks and moves them through qualification and
// execution.
type Tasks interface {
	// EnqueueTasks stores tasks in state NEW. A task whose ID exists is left
	// untouched. It returns how many were new.
	EnqueueTasks(ctx context.Context, tasks ...Task) (int, error)
	// GetTask returns one of the client's tasks.
	GetTask(ctx context.Context, client, id string) (Task, error)
	// ListTasks returns matching tasks, most recently updated first.
	ListTasks(ctx context.Context, q TaskQuery) ([]Task, error)
	// ClaimTasks leases up to c.Limit tasks the stage may claim whose
	// RunAfter has passed, highest priority first, moving them to the stage's
	// running state and counting an attempt.
	ClaimTasks(ctx context.Context, stage Stage, c Claim) ([]Task, error)
	// ExtendTaskLeases moves the lease of the owner's tasks to until and
	// returns how many it still held.
	ExtendTaskLeases(ctx context.Context, owner string, ids []string, until time.Time) (int, error)
	// TransitionTasks applies each transition atomically with its event,
	// with the same partial-failure contract as TransitionDocuments.
	TransitionTasks(ctx context.Context, ts []TaskTransition) error
	// RescueTasks returns the stage's running tasks whose lease ran out
	// before now to the stage's retry state, or to FAILED when their
	// attempts are spent.
	RescueTasks(ctx context.Context, stage Stage, now time.Time) (int, error)
}

// Memories stores TaskMemory, one per task.
type Memories interface {
	// SaveTaskMemory creates or replaces the memory of m.TaskID.
	SaveTaskMemory(ctx context.Context, m TaskMemory) error
	// GetTaskMemory returns the memory of one of the client's tasks.
	GetTaskMemory(ctx context.Context, client, taskID string) (TaskMemory, error)
	// DeleteTaskMemory removes it; deleting a missing memory is not an error.
	DeleteTaskMemory(ctx context.Context, client, taskID string) error
}

// EventQuery selects events. Zero fields match everything.
type EventQuery struct {
	Client      string
	Aggregate   string
	AggregateID string
	AfterSeq    int64
	Limit       int // default 1000
}

// Events is the append-only event log.
type Events interface {
	// AppendEvent appends e and returns it with Seq and At set.
	AppendEvent(ctx context.Context, e Event) (Event, error)
	// ListEvents returns matching events in Seq order.
	ListEvents(ctx context.Context, q EventQuery) ([]Event, error)
	// LatestEventSeq returns the Seq of the last event appended (0: none).
	LatestEventSeq(ctx context.Context) (int64, error)
}

// Aliases is the per-client alias registry used by ref resolution.
type Aliases interface {
	// ResolveAlias returns the canonical ref alias stands for in client's
	// registry, or ErrNotFound.
	ResolveAlias(ctx context.Context, client, alias string) (string, error)
	// RecordAlias maps alias to canonical for client, replacing an earlier
	// mapping of the same alias.
	RecordAlias(ctx context.Context, client, alias, canonical string) error
}

// Cursors stores poller positions.
type Cursors interface {
	// GetCursor returns the committed value for key, or ErrNotFound.
	GetCursor(ctx context.Context, key string) (string, error)
	// CommitCursor stores value for key. Pollers call it only after the
	// documents the cursor covers are stored.
	CommitCursor(ctx context.Context, key, value string) error
}

// Clients stores tenants and their API keys.
type Clients interface {
	// PutClient creates the client unless it exists; it reports whether it
	// was created.
	PutClient(ctx context.Context, c Client) (bool, error)
	GetClient(ctx context.Context, id string) (Client, error)
	ListClients(ctx context.Context) ([]Client, error)
	// SetClientNamespaces replaces the client's declared namespaces
	// (Client.Namespaces; validated, sorted, without repeats); an unknown
	// client is ErrNotFound.
	SetClientNamespaces(ctx context.Context, id string, namespaces []string) (Client, error)
	// CreateAPIKey stores k (whose Hash is HashAPIKey of the secret).
	CreateAPIKey(ctx context.Context, k APIKey) error
	// LookupAPIKey finds an unrevoked key by hash, or ErrNotFound.
	LookupAPIKey(ctx context.Context, hash string) (APIKey, error)
	// ListAPIKeys lists the keys of a client ("" for admin keys).
	ListAPIKeys(ctx context.Context, client string) ([]APIKey, error)
	// RevokeAPIKey revokes a key; revoking twice is not an error.
	RevokeAPIKey(ctx context.Context, id string) error
}

// Link-pattern kinds.
const (
	LinkAllow = "allow" // whitelisted: links matching it are fetched
	LinkBlock = "block" // blacklisted: links matching it are never fetched
)

// LinkPattern classifies links of one client: a domain ("example.com"
// matches it and its subdomains) or a URL prefix ("https://x.test/private/").
type LinkPattern struct {
	Client    string    `json:"client"`
	Kind      string    `json:"kind"`
	Pattern   string    `json:"pattern"`
	CreatedAt time.Time `json:"createdAt"`
}

// LinkPatterns stores the link-safety patterns of each client.
type LinkPatterns interface {
	// AddLinkPattern adds a pattern; adding it again changes nothing.
	AddLinkPattern(ctx context.Context, p LinkPattern) error
	// RemoveLinkPattern removes one; removing a missing one is not an error.
	RemoveLinkPattern(ctx context.Context, client, kind, pattern string) error
	// ListLinkPatterns lists a client's patterns.
	ListLinkPatterns(ctx context.Context, client string) ([]LinkPattern, error)
}

// ModelCache keeps model answers, so that qualifying unchanged content
// again costs no model call.
type ModelCache interface {
	// GetModelAnswer returns the answer stored under key, or ErrNotFound.
	GetModelAnswer(ctx context.Context, key string) ([]byte, error)
	// PutModelAnswer stores an answer, replacing one under the same key.
	PutModelAnswer(ctx context.Context, key string, answer []byte) error
}

// Store is every role of the pipeline state in one backend.
type Store interface {
	LinkPatterns
	ModelCache
	Documents
	Tasks
	Memories
	Events
	Aliases
	Cursors
	Clients
	// Stats counts documents and tasks per state, source, kind and client.
	Stats(ctx context.Context) (Stats, error)
	// Ping checks the backend is reachable.
	Ping(ctx context.Context) error
	Close() error
}

// PrepareDocument validates doc and fills in what the store derives: the
// content hash (from Raw when empty), the ID, the initial state and limits.
// Backends call it at the top of PutDocument.
func PrepareDocument(doc Document, now time.Time) (Document, error) {
	switch {
	case strings.TrimSpace(doc.Client) == "":
		return doc, invalid("client", "required")
	case !doc.SourceType.Valid():
		return doc, invalid("sourceType", fmt.Sprintf("%q is not a source type (upper-case letters, digits and _)", doc.SourceType))
	case strings.TrimSpace(doc.ExternalID) == "":
		return doc, invalid("externalId", "required")
	}
	if doc.ContentHash == "" {
		if len(doc.Raw) == 0 {
			return doc, invalid("raw", "required when contentHash is empty")
		}
		doc.ContentHash = ContentHash(doc.Raw)
	}
	doc.ID = DocumentID(doc.Client, doc.SourceType, doc.ExternalID, doc.ContentHash)
	doc.State = DocNew
	doc.Attempts = 0
	doc.LeaseOwner, doc.LeaseUntil, doc.Error = "", time.Time{}, nil
	if doc.MaxAttempts <= 0 {
		doc.MaxAttempts = DefaultMaxAttempts
	}
	if doc.ObservedAt.IsZero() {
		doc.ObservedAt = now
	}
	doc.UpdatedAt = now
	return doc, nil
}

// PrepareTask validates t and fills in its ID (when empty), state and
// limits. Backends call it for each task in EnqueueTasks.
func PrepareTask(t Task, now time.Time) (Task, error) {
	switch {
	case strings.TrimSpace(t.Client) == "":
		return t, invalid("client", "required")
	case t.Kind != KindData && t.Kind != KindLink:
		return t, invalid("kind", fmt.Sprintf("%q is not one of %v", t.Kind, TaskKinds))
	case t.SourceDoc == "" && t.ID == "":
		return t, invalid("sourceDoc", "required when id is empty")
	}
	if t.ID == "" {
		var link string
		if t.Kind == KindLink {
			var p struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(t.Payload, &p)
			if p.URL == "" {
				return t, invalid("payload.url", "required for LINK_PROCESSING")
			}
			link = p.URL
		}
		t.ID = TaskID(t.SourceDoc, t.Kind, link)
	}
	if t.CorrelationID == "" {
		t.CorrelationID = t.ID
	}
	if t.MaxAttempts <= 0 {
		t.MaxAttempts = DefaultMaxAttempts
	}
	t.State = TaskNew
	t.Attempts = 0
	t.LeaseOwner, t.LeaseUntil, t.LastError, t.Result = "", time.Time{}, nil, nil
	t.Usage = Usage{}
	t.CreatedAt, t.UpdatedAt = now, now
	return t, nil
}

// CheckDocumentTransition validates a transition against the state machine
// and the document's current state and lease. Backends call it inside the
// atomic unit that applies the transition.
func CheckDocumentTransition(cur Document, t DocumentTransition) error {
	if !CanTransitionDocument(t.From, t.To) {
		return fmt.Errorf("document %s %s -> %s: %w", t.ID, t.From, t.To, ErrIllegalTransition)
	}
	if t.To == DocIndexing {
		return fmt.Errorf("document %s -> %s: only a claim leases a document: %w", t.ID, t.To, ErrIllegalTransition)
	}
	if cur.State != t.From {
		return fmt.Errorf("document %s is %s, not %s: %w", t.ID, cur.State, t.From, ErrConflict)
	}
	if t.Owner != "" && cur.LeaseOwner != t.Owner {
		return fmt.Errorf("document %s is leased by %q, not %q: %w", t.ID, cur.LeaseOwner, t.Owner, ErrConflict)
	}
	return nil
}

// CheckTaskTransition is CheckDocumentTransition for tasks.
func CheckTaskTransition(cur Task, t TaskTransition) error {
	if !CanTransitionTask(t.From, t.To) {
		return fmt.Errorf("task %s %s -> %s: %w", t.ID, t.From, t.To, ErrIllegalTransition)
	}
	if _, running := StageOf(t.To); running {
		return fmt.Errorf("task %s -> %s: only a claim leases a task: %w", t.ID, t.To, ErrIllegalTransition)
	}
	if cur.State != t.From {
		return fmt.Errorf("task %s is %s, not %s: %w", t.ID, cur.State, t.From, ErrConflict)
	}
	if t.Owner != "" && cur.LeaseOwner != t.Owner {
		return fmt.Errorf("task %s is leased by %q, not %q: %w", t.ID, cur.LeaseOwner, t.Owner, ErrConflict)
	}
	return nil
}

// ApplyTaskTransition returns cur after t, at now. It assumes
// CheckTaskTransition passed.
func ApplyTaskTransition(cur Task, t TaskTransition, now time.Time) Task {
	cur.State = t.To
	cur.LeaseOwner, cur.LeaseUntil = "", time.Time{}
	cur.RunAfter = t.RunAfter
	if t.Error != nil {
		cur.LastError = t.Error
	}
	if t.Result != nil {
		cur.Result = t.Result
	}
	if t.Usage != nil {
		cur.Usage = *t.Usage
	}
	switch {
	case t.ResetAttempts:
		cur.Attempts = 0
	case t.RefundAttempt && cur.Attempts > 0:
		cur.Attempts--
	}
	cur.UpdatedAt = now
	return cur
}

// ApplyDocumentTransition returns cur after t, at now. It assumes
// CheckDocumentTransition passed.
func ApplyDocumentTransition(cur Document, t DocumentTransition, now time.Time) Document {
	cur.State = t.To
	cur.LeaseOwner, cur.LeaseUntil = "", time.Time{}
	cur.RunAfter = t.RunAfter
	cur.Error = t.Error
	switch {
	case t.ResetAttempts:
		cur.Attempts = 0
	case t.RefundAttempt && cur.Attempts > 0:
		cur.Attempts--
	}
	cur.UpdatedAt = now
	return cur
}

// TaskStateEvent is the event that records a task's state change.
// owner is the lease holder that made the change ("" for admin or rescue).
func TaskStateEvent(cur Task, from TaskState, owner, reason string, now time.Time) Event {
	return stateEvent(AggregateTask, EventTaskState, cur.Client, cur.ID, StateChange{
		From: string(from), To: string(cur.State), Attempt: cur.Attempts, RunAfter: cur.RunAfter,
		Owner: owner, Reason: reason, Error: errIf(cur.State, cur.LastError),
	}, now)
}

// DocumentStateEvent is the event that records a document's state change.
func DocumentStateEvent(cur Document, from DocumentState, owner, reason string, now time.Time) Event {
	return stateEvent(AggregateDocument, EventDocumentState, cur.Client, cur.ID, StateChange{
		From: string(from), To: string(cur.State), Attempt: cur.Attempts, RunAfter: cur.RunAfter,
		Owner: owner, Reason: reason, Error: cur.Error,
	}, now)
}

// errIf reports the last error only with states that are about an error.
func errIf(st TaskState, e *ErrorInfo) *ErrorInfo {
	if st == TaskRetry || st == TaskFailed || st == TaskReadyForGPU {
		return e
	}
	return nil
}

func stateEvent(aggregate, typ, client, id string, c StateChange, now time.Time) Event {
	data, _ := json.Marshal(c)
	return Event{At: now, Client: client, Aggregate: aggregate, AggregateID: id, Type: typ, Data: data}
}

// RescueTask returns the transition that rescues a running task whose lease
// ran out: back to the stage's retry state, or FAILED when attempts are
// spent.
func RescueTask(cur Task, stage Stage, now time.Time) TaskTransition {
	e := &ErrorInfo{Class: "lease_expired", Message: fmt.Sprintf("lease held by %q expired at %s", cur.LeaseOwner, cur.LeaseUntil.UTC().Format(time.RFC3339)), Recoverable: true}
	t := TaskTransition{ID: cur.ID, From: cur.State, To: stage.RetryState(), Error: e, Reason: "lease_expired", RunAfter: now}
	if cur.Attempts >= cur.MaxAttempts {
		t.To = TaskFailed
		e.Message = fmt.Sprintf("attempts exhausted (%d/%d): %s", cur.Attempts, cur.MaxAttempts, e.Message)
	}
	return t
}

// RescueDocument is RescueTask for documents.
func RescueDocument(cur Document, now time.Time) DocumentTransition {
	e := &ErrorInfo{Class: "lease_expired", Message: fmt.Sprintf("lease held by %q expired at %s", cur.LeaseOwner, cur.LeaseUntil.UTC().Format(time.RFC3339)), Recoverable: true}
	t := DocumentTransition{ID: cur.ID, From: cur.State, To: DocNew, Error: e, Reason: "lease_expired", RunAfter: now}
	if cur.Attempts >= cur.MaxAttempts {
		t.To = DocQuarantined
		e.Message = fmt.Sprintf("attempts exhausted (%d/%d): %s", cur.Attempts, cur.MaxAttempts, e.Message)
	}
	return t
}

var clientIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidateClientID checks a client ID: lower-case letters, digits, '_' and
// '-', starting with a letter or digit, at most 63 characters, so that it can
// name ArangoDB collections and Weaviate tenants unchanged.
func ValidateClientID(id string) error {
	if !clientIDPattern.MatchString(id) {
		return invalid("client", fmt.Sprintf("%q must match %s", id, clientIDPattern))
	}
	return nil
}

var namespacePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{1,31}$`)

// NormalizeNamespaces checks a client's declared namespaces — lower-case
// letters, digits and _, starting with a letter, 2 to 32 characters: what
// a type:id mention can name — and returns them sorted without repeats.
func NormalizeNamespaces(ns []string) ([]string, error) {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		if !namespacePattern.MatchString(n) {
			return nil, invalid("namespaces", fmt.Sprintf("%q must match %s", n, namespacePattern))
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ValidateAPIKey checks a key before it is stored.
func ValidateAPIKey(k APIKey) error {
	switch {
	case k.ID == "":
		return invalid("id", "required")
	case len(k.Hash) != 64:
		return invalid("hash", "must be HashAPIKey of the secret")
	case k.Role == RoleAdmin && k.Client != "":
		return invalid("client", "admin keys belong to no client")
	case k.Role == RoleClient:
		return ValidateClientID(k.Client)
	case k.Role != RoleAdmin:
		return invalid("role", fmt.Sprintf("%q is not %q or %q", k.Role, RoleClient, RoleAdmin))
	}
	return nil
}

// PrepareTaskMemory validates m, stamps it and returns it with its JSON
// encoding. Backends call it at the top of SaveTaskMemory.
func PrepareTaskMemory(m TaskMemory, now time.Time) (TaskMemory, []byte, error) {
	if m.TaskID == "" || m.Client == "" {
		return m, nil, fmt.Errorf("%w: task memory: taskId and client are required", ErrInvalid)
	}
	m.UpdatedAt = now.UTC()
	data, err := json.Marshal(m)
	if err != nil {
		return m, nil, fmt.Errorf("%w: task memory: %v", ErrInvalid, err)
	}
	return m, data, nil
}

// TaskMemoryEvent is the event that records a saved TaskMemory.
func TaskMemoryEvent(m TaskMemory, now time.Time) Event {
	data, _ := json.Marshal(map[string]any{"routingDecision": m.RoutingDecision})
	return Event{At: now, Client: m.Client, Aggregate: AggregateTask, AggregateID: m.TaskID, Type: EventTaskMemorySaved, Data: data}
}

// DocumentStoredEvent is the event that records a new document version.
func DocumentStoredEvent(doc Document, now time.Time) Event {
	data, _ := json.Marshal(map[string]any{"sourceType": doc.SourceType, "externalId": doc.ExternalID, "version": doc.Version, "connection": doc.Connection})
	return Event{At: now, Client: doc.Client, Aggregate: AggregateDocument, AggregateID: doc.ID, Type: EventDocumentStored, Data: data}
}
