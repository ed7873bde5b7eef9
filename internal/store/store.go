package store

import (
	"context"
	"encoding/json"
	"math"
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
	// Urgent claims only items above PriorityBulk (live documents and
	// their tasks).
	Urgent bool
}

// MinPriority is the lowest priority the claim takes.
func (c Claim) MinPriority() int {
	if c.Urgent {
		return PriorityBulk + 1
	}
	return math.MinInt32
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
	// Bulk gives the document PriorityBulk (a reprocess: its replay waits
	// behind what arrives live).
	Bulk bool
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
	// Bulk gives the task PriorityBulk (a reprocess).
	Bulk bool
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

// DocumentLister lists documents (Documents does).
type DocumentLister interface {
	ListDocuments(ctx context.Context, q DocumentQuery) ([]Document, error)
}

// EachDocument calls fn with every document q selects, most recently
// updated first, one page of the listing (1,000) at a time; q's Limit and
// After are its own.
func EachDocument(ctx context.Context, l DocumentLister, q DocumentQuery, fn func(Document)) error {
	q.Limit, q.After = 1000, nil
	for {
		page, err := l.ListDocuments(ctx, q)
		if err != nil {
			return err
		}
		for _, d := range page {
			fn(d)
		}
		if len(page) < q.Limit {
			return nil
		}
		last := page[len(page)-1]
		q.After = &Position{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
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
	// PutDocuments puts each of docs as PutDocument does, in order, in one
	// write where the backend can (SQLite: one transaction; a page of a
	// poller, a run of an import). results[i] is docs[i]'s; a document the
	// store refuses has its error there (errors.Is ErrInvalid) and the
	// others are stored. An err is a failure of the store: none of the
	// results is acknowledged, and the caller puts them again (content
	// already stored is a no-op).
	PutDocuments(ctx context.Context, docs []Document) (results []PutResult, err error)
	// GetDocument returns one version of the client's documents.
	GetDocument(ctx context.Context, client, id string) (Document, error)
	// GetDocuments returns the versions ids of the client's documents, in
	// one read where the backend can, in no particular order; an ID the
	// client has no document of is left out.
	GetDocuments(ctx context.Context, client string, ids []string) ([]Document, error)
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

// PutResult is what PutDocuments did with one document: it is Stored (new
// when Created), or Err says why the store refused it (ErrInvalid).
type PutResult struct {
	Stored  Document
	Created bool
	Err     error
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
	// SaveTaskMemories saves each of ms as SaveTaskMemory does, in one
	// write where the backend can (SQLite: all or none). After an error
	// some may be saved (MongoDB); saving them again is harmless.
	SaveTaskMemories(ctx context.Context, ms []TaskMemory) error
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
	// ResolveAliases returns what each of aliases stands for in client's
	// registry, in one read where the backend can; an alias with no entry
	// is absent from the map.
	ResolveAliases(ctx context.Context, client string, aliases []string) (map[string]string, error)
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

// Encoder is a client's own text encoder (kb/embed/corpus): the model, by
// its name (the identity of its vectors), and what it was trained on.
type Encoder struct {
	Client    string    `json:"client"`
	Name      string    `json:"name"`
	Model     []byte    `json:"-"`
	Items     int       `json:"items"` // the documents trained on
	TrainedAt time.Time `json:"trainedAt"`
	// Documents is how many documents (every version, in every state)
	// the client had when it was trained, when known: the measure by
	// which the encoder schedule sees the client grow.
	Documents int `json:"documents,omitempty"`
	// ReplayPending says that the client's documents are to be replayed
	// with it (a reprocess with wipe) and that no replay has finished
	// since it was stored: a process that stopped during the replay
	// leaves it set, and the encoder schedule replays them again.
	ReplayPending bool `json:"replayPending"`
}

// Encoders keeps each client's encoder, so that every process of a
// deployment embeds the client's texts alike.
type Encoders interface {
	// PutEncoder stores a client's encoder, replacing the one it had.
	PutEncoder(ctx context.Context, e Encoder) error
	// GetEncoder returns a client's encoder, or ErrNotFound.
	GetEncoder(ctx context.Context, client string) (Encoder, error)
	// EncoderName returns the name of a client's encoder ("" when it has
	// none) without reading the model: processes check it often.
	EncoderName(ctx context.Context, client string) (string, error)
	// ListEncoders returns every client's encoder without its model (Model
	// nil), by client.
	ListEncoders(ctx context.Context) ([]Encoder, error)
	// EncoderReplayed clears ReplayPending of the client's encoder if it is
	// still the one named name (a newer one keeps its own); a client with
	// no encoder is ErrNotFound.
	EncoderReplayed(ctx context.Context, client, name string) error
}

// ValidateEncoder checks an encoder before it is stored.
func ValidateEncoder(e Encoder) error {
	switch {
	case ValidateClientID(e.Client) != nil:
		return invalid("client", ValidateClientID(e.Client).Error())
	case e.Name == "":
		return invalid("name", "required")
	case len(e.Model) == 0:
		return invalid("model", "required")
	}
	return nil
}

// Store is every role of the pipeline state in one backend.
type Store interface {
	LinkPatterns
	ModelCache
	Encoders
	Documents
	Tasks
	Memories
	Events
	Aliases
	Identities
	Cursors
	Clients
	// Stats counts documents and tasks per state, source, kind and client.
	Stats(ctx context.Context) (Stats, error)
	// Backlog counts the documents and tasks the indexers and the
	// qualifier have not finished (BacklogDocumentStates,
	// BacklogTaskStates), by state. It reads only those, by their state's
	// index, where Stats reads an index entry of every document and task:
	// a loop that waits for a pipeline to drain asks it often.
	Backlog(ctx context.Context) (Backlog, error)
	// Ping checks the backend is reachable.
	Ping(ctx context.Context) error
	Close() error
}
