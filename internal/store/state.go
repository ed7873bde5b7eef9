package store

import "slices"

// DocumentState is the processing state of one source document version.
type DocumentState string

const (
	// DocNew is a stored version waiting for an indexer. Pollers and the ingest
	// API create documents in it; a retry, a released or expired lease, and an
	// admin reprocess put one back.
	DocNew DocumentState = "NEW"
	// DocIndexing is a version leased by an indexer. Only a claim moves a
	// document in; the lease holder moves it out (or the rescuer when the
	// lease expires).
	DocIndexing DocumentState = "INDEXING"
	// DocIndexed is a version whose tasks exist. Terminal until reprocessed.
	DocIndexed DocumentState = "INDEXED"
	// DocQuarantined is a version that cannot be indexed (malformed input or
	// attempts exhausted); Error says why. Terminal until reprocessed.
	DocQuarantined DocumentState = "QUARANTINED"
)

// DocumentStates lists every document state in pipeline order.
var DocumentStates = []DocumentState{DocNew, DocIndexing, DocIndexed, DocQuarantined}

// TaskKind says what a task asks the qualifier to do.
type TaskKind string

const (
	// KindData processes the content of one source document.
	KindData TaskKind = "DATA_PROCESSING"
	// KindLink processes one link found in a source document.
	KindLink TaskKind = "LINK_PROCESSING"
)

// TaskKinds lists every task kind.
var TaskKinds = []TaskKind{KindData, KindLink}

// TaskState is the state of a pending task.
type TaskState string

const (
	// TaskNew is a task waiting for the qualifier. Indexers create tasks in it;
	// an admin retry or reprocess, and a released qualification, put one back.
	TaskNew TaskState = "NEW"
	// TaskQualifying is a task leased by the qualifier.
	TaskQualifying TaskState = "QUALIFICATION_IN_PROGRESS"
	// TaskDone is a task the qualifier finished that needs no further work.
	TaskDone TaskState = "DONE"
	// TaskReadyForGPU is a qualified task waiting for the executor. The
	// qualifier moves tasks in; preemption, a transient execution error and
	// an expired execution lease move them back in.
	TaskReadyForGPU TaskState = "READY_FOR_GPU"
	// TaskExecution is a task leased by the executor.
	TaskExecution TaskState = "EXECUTION"
	// TaskCompleted is a task the executor finished; Result holds its output.
	TaskCompleted TaskState = "COMPLETED"
	// TaskRetry is a task whose qualification failed transiently; the
	// qualifier claims it again once RunAfter has passed.
	TaskRetry TaskState = "RETRY"
	// TaskFailed is a task that failed permanently or ran out of attempts;
	// LastError says why and whether a human can recover it.
	TaskFailed TaskState = "FAILED"
	// TaskCancelled is a task an admin cancelled.
	TaskCancelled TaskState = "CANCELLED"
)

// TaskStates lists every task state in pipeline order.
var TaskStates = []TaskState{
	TaskNew, TaskQualifying, TaskDone, TaskReadyForGPU, TaskExecution,
	TaskCompleted, TaskRetry, TaskFailed, TaskCancelled,
}

var docTransitions = map[DocumentState][]DocumentState{
	DocNew:         {DocIndexing},
	DocIndexing:    {DocIndexed, DocQuarantined, DocNew},
	DocIndexed:     {DocNew},
	DocQuarantined: {DocNew},
}

var taskTransitions = map[TaskState][]TaskState{
	TaskNew:        {TaskQualifying, TaskCancelled},
	TaskRetry:      {TaskQualifying, TaskCancelled},
	TaskQualifying: {TaskDone, TaskReadyForGPU, TaskRetry, TaskFailed, TaskNew, TaskCancelled},
	// A reprocess sends a qualified task back to be qualified again.
	TaskReadyForGPU: {TaskExecution, TaskCancelled, TaskNew},
	TaskExecution:   {TaskCompleted, TaskReadyForGPU, TaskFailed, TaskCancelled},
	TaskDone:        {TaskNew},
	TaskCompleted:   {TaskNew},
	TaskFailed:      {TaskNew},
	TaskCancelled:   {TaskNew},
}

// CanTransitionDocument reports whether a document may move from one state to
// another.
func CanTransitionDocument(from, to DocumentState) bool {
	return slices.Contains(docTransitions[from], to)
}

// CanTransitionTask reports whether a task may move from one state to another.
func CanTransitionTask(from, to TaskState) bool {
	return slices.Contains(taskTransitions[from], to)
}

// Stage names the worker stage that claims tasks: which states it claims
// from, which state it leases them in, and where a retry or release sends
// them.
type Stage string

const (
	// StageQualify claims NEW and RETRY tasks into QUALIFICATION_IN_PROGRESS.
	StageQualify Stage = "qualify"
	// StageExecute claims READY_FOR_GPU tasks into EXECUTION.
	StageExecute Stage = "execute"
)

// ClaimStates returns the states the stage claims from.
func (s Stage) ClaimStates() []TaskState {
	switch s {
	case StageQualify:
		return []TaskState{TaskNew, TaskRetry}
	case StageExecute:
		return []TaskState{TaskReadyForGPU}
	}
	return nil
}

// Running returns the state a claimed task holds while leased by the stage.
func (s Stage) Running() TaskState {
	switch s {
	case StageQualify:
		return TaskQualifying
	case StageExecute:
		return TaskExecution
	}
	return ""
}

// Succeeded returns the states a handler of the stage may finish a task in;
// the first is the default.
func (s Stage) Succeeded() []TaskState {
	switch s {
	case StageQualify:
		return []TaskState{TaskDone, TaskReadyForGPU}
	case StageExecute:
		return []TaskState{TaskCompleted}
	}
	return nil
}

// RetryState returns where a transient failure or an expired lease sends a
// task of the stage.
func (s Stage) RetryState() TaskState {
	switch s {
	case StageQualify:
		return TaskRetry
	case StageExecute:
		return TaskReadyForGPU
	}
	return ""
}

// ReleaseState returns where a released task (preempted, or interrupted by
// shutdown) goes, without spending an attempt.
func (s Stage) ReleaseState() TaskState {
	switch s {
	case StageQualify:
		return TaskNew
	case StageExecute:
		return TaskReadyForGPU
	}
	return ""
}

// Valid reports whether s is a known stage.
func (s Stage) Valid() bool { return s.Running() != "" }

// StageOf returns the stage whose running state is st, if any.
func StageOf(st TaskState) (Stage, bool) {
	for _, s := range []Stage{StageQualify, StageExecute} {
		if s.Running() == st {
			return s, true
		}
	}
	return "", false
}
