package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"time"
)

// SourceType is the kind of system a document came from.
type SourceType string

// The source types of the built-in kinds (ARCHITECTURE §4).
const (
	SourceEmail      SourceType = "EMAIL"
	SourceJira       SourceType = "JIRA"
	SourceConfluence SourceType = "CONFLUENCE"
	SourceGit        SourceType = "GIT"
	SourceFile       SourceType = "FILE"
)

var sourceTypePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{1,31}$`)

// Valid reports whether t can name a source type: upper-case letters,
// digits and _, starting with a letter, 2 to 32 characters. Source kinds
// are open (pollers.Kind): a new kind brings its own type.
func (t SourceType) Valid() bool { return sourceTypePattern.MatchString(string(t)) }

// Link is a link found in a document: the URL and the text around it.
type Link struct {
	URL     string `json:"url"`
	Context string `json:"context,omitempty"`
}

// Normalized is the source-independent view of a document that pollers
// produce and indexers read.
type Normalized struct {
	Title    string         `json:"title,omitempty"`
	Body     string         `json:"body,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Links    []Link         `json:"links,omitempty"`
	// Warnings say what the parser could not keep as it was — a part
	// decoded best-effort, a body cut at a size cap — on a document that is
	// indexed all the same. A document with warnings is degraded
	// (DocumentQuery.Degraded, Stats.Degraded).
	Warnings []string `json:"warnings,omitempty"`
}

// MetaParseError is the Normalized.Metadata key under which a poller
// records why it could not parse an item. The raw item is stored all the
// same, and the indexers quarantine it with that reason.
const MetaParseError = "parseError"

// Unparsable returns the document of an item a poller could not parse: its
// raw bytes, whatever title it could read, and the reason, which makes the
// indexers quarantine it. An externalID that is empty or longer than 255
// bytes is replaced by a hash of raw. raw may be empty (an empty or
// unreadable file): the content hash is set, so it can still be stored.
func Unparsable(source SourceType, externalID, title string, raw []byte, reason error) Document {
	if externalID == "" || len(externalID) > 255 {
		externalID = HashID(raw)
	}
	return Document{SourceType: source, ExternalID: externalID, Raw: raw, ContentHash: ContentHash(raw),
		Normalized: Normalized{Title: title, Metadata: map[string]any{MetaParseError: reason.Error()}}}
}

// HashID is the external ID of an item that has none of its own:
// "sha256:" and the first 12 bytes of its content hash.
func HashID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:12])
}

// Document is one immutable version of an external item, plus the mutable
// processing fields (State, lease, Attempts, Error).
type Document struct {
	ID          string     `json:"id"`
	Client      string     `json:"client"`
	SourceType  SourceType `json:"sourceType"`
	Connection  string     `json:"connection"`
	ExternalID  string     `json:"externalId"`
	Version     int        `json:"version"`
	ContentHash string     `json:"contentHash"`
	Raw         []byte     `json:"raw,omitempty"`
	Normalized  Normalized `json:"normalized"`
	ObservedAt  time.Time  `json:"observedAt"`
	// Priority orders the claims of documents and of their tasks: higher
	// first (PriorityLive before PriorityBulk).
	Priority int `json:"priority,omitempty"`

	State       DocumentState `json:"state"`
	LeaseOwner  string        `json:"leaseOwner,omitempty"`
	LeaseUntil  time.Time     `json:"leaseUntil,omitzero"`
	Attempts    int           `json:"attempts"`
	MaxAttempts int           `json:"maxAttempts"`
	RunAfter    time.Time     `json:"runAfter,omitzero"`
	Error       *ErrorInfo    `json:"error,omitempty"`
	UpdatedAt   time.Time     `json:"updatedAt"`
}

// Priorities of documents and tasks: what a poll or POST /api/v1/ingest
// brings in now is indexed and qualified before a bulk import or a
// reprocess, so a new email is searchable in milliseconds while a 200,000
// issue backfill runs.
const (
	PriorityBulk = 0
	PriorityLive = 10
)

// SourceURN names the item in the knowledge base: its chunks' source,
// which each new version's chunks replace ("JIRA:TIMOB-123").
func (d Document) SourceURN() string { return string(d.SourceType) + ":" + d.ExternalID }

// ErrorInfo describes why a document or task failed: a stable class callers
// can group by, a message, and whether a human can recover it (fix a
// credential, retry after an outage) as opposed to input that will never
// work.
type ErrorInfo struct {
	Class       string `json:"class"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
}

// Budget caps what one task may spend on models. Zero means unlimited.
type Budget struct {
	MaxIterations int           `json:"maxIterations,omitempty"`
	MaxTokens     int           `json:"maxTokens,omitempty"`
	MaxDuration   time.Duration `json:"maxDuration,omitempty"`
}

// Usage is what a task spent.
type Usage struct {
	Iterations   int           `json:"iterations,omitempty"`
	PromptTokens int           `json:"promptTokens,omitempty"`
	OutputTokens int           `json:"outputTokens,omitempty"`
	ModelCalls   int           `json:"modelCalls,omitempty"`
	Duration     time.Duration `json:"duration,omitempty"`
}

// Task is a unit of work for the qualifier and, when it needs a big model,
// the executor.
type Task struct {
	ID            string          `json:"id"`
	Kind          TaskKind        `json:"kind"`
	Client        string          `json:"client"`
	SourceDoc     string          `json:"sourceDoc"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	CorrelationID string          `json:"correlationId"`
	Priority      int             `json:"priority"`
	State         TaskState       `json:"state"`
	Attempts      int             `json:"attempts"`
	MaxAttempts   int             `json:"maxAttempts"`
	RunAfter      time.Time       `json:"runAfter,omitzero"`
	LeaseOwner    string          `json:"leaseOwner,omitempty"`
	LeaseUntil    time.Time       `json:"leaseUntil,omitzero"`
	LastError     *ErrorInfo      `json:"lastError,omitempty"`
	Budget        Budget          `json:"budget"`
	Usage         Usage           `json:"usage"`
	Result        json.RawMessage `json:"result,omitempty"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
}

// MadeDone reports a task made DONE when it was enqueued (PrepareTask): a
// link its document's DATA_PROCESSING task records (DataPayload.Recorded).
// Any task the qualifier ran was claimed, and counts an attempt.
func (t Task) MadeDone() bool { return t.State == TaskDone && t.Attempts == 0 }

// DataPayload is the payload of a DATA_PROCESSING task (the indexers
// write it, the qualifier reads it).
type DataPayload struct {
	SourceType SourceType `json:"sourceType"`
	ExternalID string     `json:"externalId"`
	Version    int        `json:"version"`
	Title      string     `json:"title,omitempty"`
	Links      []string   `json:"links,omitempty"`
	Summary    string     `json:"summary"`
	// Recorded are the links this task records with its document: their
	// LINK_PROCESSING tasks were made DONE, since none was to be fetched
	// and no model was to decide it (indexers.Config.Links). The
	// qualifier classifies them again: one the policy of the day fetches
	// or asks about, it sends its task back to NEW instead.
	Recorded []RecordedLink `json:"recorded,omitempty"`
}

// RecordedLink is a link a DATA_PROCESSING task records with its document:
// what its own LINK_PROCESSING task would have recorded.
type RecordedLink struct {
	Task    string `json:"task"` // its LINK_PROCESSING task, made DONE
	URL     string `json:"url"`
	Context string `json:"context,omitempty"`
}

// Kind is the kind of the tasks that carry it.
func (DataPayload) Kind() TaskKind { return KindData }

// LinkPayload is the payload of a LINK_PROCESSING task (the indexers write
// it, the qualifier reads it).
type LinkPayload struct {
	URL        string     `json:"url"`
	SourceDoc  string     `json:"sourceDoc"`
	SourceType SourceType `json:"sourceType"`
	Title      string     `json:"title,omitempty"` // subject, issue key and summary, page title
	From       string     `json:"from,omitempty"`  // sender or author
	Context    string     `json:"context,omitempty"`
}

// Kind is the kind of the tasks that carry it.
func (LinkPayload) Kind() TaskKind { return KindLink }

// TaskMemory is the context the qualifier leaves for the executor (1:1 with
// a task).
type TaskMemory struct {
	TaskID          string          `json:"taskId"`
	CorrelationID   string          `json:"correlationId"`
	Client          string          `json:"client"`
	Project         string          `json:"project,omitempty"`
	ContextSummary  string          `json:"contextSummary"`
	GraphNodeKeys   []string        `json:"graphNodeKeys,omitempty"`
	RAGDocumentIDs  []string        `json:"ragDocumentIds,omitempty"`
	StructuredData  json.RawMessage `json:"structuredData,omitempty"`
	RoutingDecision TaskState       `json:"routingDecision,omitempty"`
	RoutingReason   string          `json:"routingReason,omitempty"`
	SourceType      SourceType      `json:"sourceType,omitempty"`
	SourceID        string          `json:"sourceId,omitempty"`
	// Warnings say what qualification left out so that the rest could be
	// ingested (a relation that cannot be stored, control characters).
	Warnings []string `json:"warnings,omitempty"`
	// MainNode is the graph key of the source document's node.
	MainNode string `json:"mainNode,omitempty"`
	// Asks is what the document asks of its readers (the executor's
	// extractive workflow digests it).
	Asks      *Asks     `json:"asks,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Asks is what a document asks of its readers, sentence by sentence, from
// its own text (quoted lines and links left out).
type Asks struct {
	Questions []string `json:"questions,omitempty"` // sentences ending in "?"
	Requests  []string `json:"requests,omitempty"`  // "please", "could you", "review", ...
	Decisions []string `json:"decisions,omitempty"` // "decide", "approve", "sign-off", ...
	Deadlines []string `json:"deadlines,omitempty"` // "by Friday", "before the 12th", ...
	Of        []string `json:"of,omitempty"`        // whom: an email's To, an issue's assignee
	From      string   `json:"from,omitempty"`      // who asks: the sender, the reporter
}

// Aggregates named in the event log.
const (
	AggregateDocument = "document"
	AggregateTask     = "task"
)

// Event types the store itself appends.
const (
	EventDocumentStored  = "document.stored"
	EventDocumentState   = "document.state"
	EventTaskCreated     = "task.created"
	EventTaskState       = "task.state"
	EventTaskMemorySaved = "task.memory"
)

// Event is one entry of the append-only event log. Seq orders all events of
// a store; it is assigned by the store.
type Event struct {
	Seq         int64           `json:"seq"`
	At          time.Time       `json:"at"`
	Client      string          `json:"client"`
	Aggregate   string          `json:"aggregate"`
	AggregateID string          `json:"aggregateId"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// StateChange is the Data of a document.state or task.state event.
type StateChange struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Attempt int    `json:"attempt"`
	// RunAfter is when a retried item may be claimed again.
	RunAfter time.Time  `json:"runAfter,omitzero"`
	Owner    string     `json:"owner,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Error    *ErrorInfo `json:"error,omitempty"`
}

// Client is a tenant: one knowledge base, one set of API keys.
type Client struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Namespaces are the client's own entity types whose type:id mentions
	// in prose become nodes (order:530798957), besides those the rules
	// produce (person, jira, email, ...).
	Namespaces []string  `json:"namespaces,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Key roles.
const (
	RoleClient = "client"
	RoleAdmin  = "admin"
)

// APIKey is a stored API key. Only its hash is kept; the secret is shown
// once, when it is created.
type APIKey struct {
	ID        string    `json:"id"`
	Client    string    `json:"client,omitempty"`
	Role      string    `json:"role"`
	Name      string    `json:"name,omitempty"`
	Hash      string    `json:"-"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// HashAPIKey returns the stored form of an API key secret. Keys are random
// 256-bit tokens, so a fast hash is enough: there is nothing to brute-force.
func HashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// BackendStatus is one backend of a role (store, graph, chunks, embedder)
// and whether it answered.
type BackendStatus struct {
	Role    string `json:"role"`
	Backend string `json:"backend"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// Counts are queue depths keyed by state names.
type Counts map[string]int64

// Backlog is what the indexers and the qualifier have still to do, by
// state (Store.Backlog).
type Backlog struct {
	Documents Counts `json:"documents"`
	Tasks     Counts `json:"tasks"`
}

// BacklogDocumentStates and BacklogTaskStates are the states Backlog
// counts: waiting for the indexers or the qualifier, or being worked on by
// them.
var (
	BacklogDocumentStates = []DocumentState{DocNew, DocIndexing}
	BacklogTaskStates     = []TaskState{TaskNew, TaskRetry, TaskQualifying}
)

// Total is the sum of the counts.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Empty says that nothing waits for the indexers or the qualifier.
func (b Backlog) Empty() bool { return b.Documents.Total()+b.Tasks.Total() == 0 }

// Stats is what `jervis status` and the admin stats route report.
type Stats struct {
	Documents         Counts            `json:"documents"`
	Tasks             Counts            `json:"tasks"`
	DocumentsBySource map[string]Counts `json:"documentsBySource"`
	DocumentsByClient map[string]Counts `json:"documentsByClient"`
	TasksByKind       map[string]Counts `json:"tasksByKind"`
	TasksByClient     map[string]Counts `json:"tasksByClient"`
	// ModelUsage sums what tasks spent on models, per task kind; kinds
	// whose tasks made no model call are absent.
	ModelUsage map[string]UsageTotals `json:"modelUsage"`
	// OldestWaiting is when the longest-waiting item of each queue last
	// moved ("documents.NEW", "tasks.NEW", "tasks.RETRY",
	// "tasks.READY_FOR_GPU"); queues that are empty are absent.
	OldestWaiting map[string]time.Time `json:"oldestWaiting"`
	// Failures counts quarantined documents and failed tasks by error class
	// ("documents.<class>", "tasks.<class>").
	Failures map[string]int64 `json:"failures"`
	// Degraded counts documents kept with warnings (Normalized.Warnings).
	Degraded int64 `json:"degraded"`
	// Groups are the counts before they are summed into the maps above:
	// per client, source or kind, and state (metrics labels).
	Groups []StatsGroup `json:"-"`
	// Backends are the process's backends and whether they answer; the
	// store leaves them empty, the API and jervis status fill them in.
	Backends []BackendStatus `json:"backends,omitempty"`
}

// StatsGroup counts one client's documents of one source (or tasks of one
// kind) in one state.
type StatsGroup struct {
	Tasks        bool
	Client, Kind string // Kind: the source type of documents, the kind of tasks
	State        string
	N            int64
}

// UsageTotals is what the tasks of one kind spent on models.
type UsageTotals struct {
	Tasks        int64 `json:"tasks"`        // tasks of the kind
	ModelCalls   int64 `json:"modelCalls"`   // model calls of all of them
	PromptTokens int64 `json:"promptTokens"` // prompt tokens of all of them
	OutputTokens int64 `json:"outputTokens"` // output tokens of all of them
}

// CallsPerTask is the mean number of model calls per task.
func (u UsageTotals) CallsPerTask() float64 {
	if u.Tasks == 0 {
		return 0
	}
	return float64(u.ModelCalls) / float64(u.Tasks)
}

// NewStats returns Stats with every known state present at zero.
func NewStats() Stats {
	s := Stats{
		Documents:         Counts{},
		Tasks:             Counts{},
		DocumentsBySource: map[string]Counts{},
		DocumentsByClient: map[string]Counts{},
		TasksByKind:       map[string]Counts{},
		TasksByClient:     map[string]Counts{},
		ModelUsage:        map[string]UsageTotals{},
		OldestWaiting:     map[string]time.Time{},
		Failures:          map[string]int64{},
	}
	for _, st := range DocumentStates {
		s.Documents[string(st)] = 0
	}
	for _, st := range TaskStates {
		s.Tasks[string(st)] = 0
	}
	return s
}

// AddDocuments records n documents of one client and source in a state.
func (s *Stats) AddDocuments(client string, source SourceType, state DocumentState, n int64) {
	s.Groups = append(s.Groups, StatsGroup{Client: client, Kind: string(source), State: string(state), N: n})
	s.Documents[string(state)] += n
	add(s.DocumentsBySource, string(source), string(state), n)
	add(s.DocumentsByClient, client, string(state), n)
}

// AddTasks records n tasks of one client and kind in a state.
func (s *Stats) AddTasks(client string, kind TaskKind, state TaskState, n int64) {
	s.Groups = append(s.Groups, StatsGroup{Tasks: true, Client: client, Kind: string(kind), State: string(state), N: n})
	s.Tasks[string(state)] += n
	add(s.TasksByKind, string(kind), string(state), n)
	add(s.TasksByClient, client, string(state), n)
}

func add(m map[string]Counts, key, state string, n int64) {
	c := m[key]
	if c == nil {
		c = Counts{}
		m[key] = c
	}
	c[state] += n
}
