package store

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The rules every backend applies: what a valid document, task, key or
// memory is, the state machines' transitions, and the events they record.

// PrepareDocuments prepares each of docs for PutDocuments as
// PrepareDocument does, with its Normalized encoded as the JSON backends
// store: results[i].Stored is docs[i] prepared, or results[i].Err says
// why it is refused (ErrInvalid); normalized[i] is its JSON.
func PrepareDocuments(docs []Document, now time.Time) (results []PutResult, normalized [][]byte) {
	results, normalized = make([]PutResult, len(docs)), make([][]byte, len(docs))
	for i, d := range docs {
		d, err := PrepareDocument(d, now)
		if err == nil {
			if normalized[i], err = json.Marshal(d.Normalized); err != nil {
				err = fmt.Errorf("%w: normalized: %v", ErrInvalid, err)
			}
		}
		results[i] = PutResult{Stored: d, Err: err}
	}
	return results, normalized
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

// PrepareTask validates t and fills in its ID (when empty), state (NEW,
// unless t is made DONE) and limits. Backends call it for each task in
// EnqueueTasks.
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
	// A task may be made DONE: settled as it is made (a link its
	// document's DATA_PROCESSING task records, DataPayload.Recorded).
	if t.State != TaskDone {
		t.State = TaskNew
	}
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
	if t.Bulk {
		cur.Priority = PriorityBulk
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
	if t.Bulk {
		cur.Priority = PriorityBulk
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

// TaskCreatedData is the data of a task's EventTaskCreated: its kind,
// document and correlation, and its state when it was made DONE.
func TaskCreatedData(t Task) json.RawMessage {
	m := map[string]any{"kind": t.Kind, "sourceDoc": t.SourceDoc, "correlationId": t.CorrelationID}
	if t.State == TaskDone {
		m["state"] = t.State
	}
	data, _ := json.Marshal(m)
	return data
}
