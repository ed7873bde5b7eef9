package worker

import (
	"errors"
	"fmt"

	"github.com/jervis-dev/jervis/internal/redact"
)

var (
	// ErrPreempted is the cancellation cause that hands a job back without
	// spending an attempt: the executor cancels running work with it when a
	// user request arrives.
	ErrPreempted = errors.New("preempted")
	// ErrShutdown is the cancellation cause of jobs still running when the
	// soft shutdown timeout has passed; they are handed back like preempted
	// ones.
	ErrShutdown = errors.New("worker shutting down")
)

// Error classes the worker assigns itself.
const (
	ClassTransient = "transient"
	ClassPermanent = "permanent"
	ClassPanic     = "panic"
	ClassTimeout   = "timeout"
)

// ClassMalformed is the class of input that can never be processed as it
// is (a document that cannot be parsed, content or a ref the knowledge base
// refuses): see Malformed.
const ClassMalformed = "malformed_input"

// Malformed marks err as caused by the input itself: permanent (retrying
// cannot help) and not recoverable by a human retry, class ClassMalformed.
func Malformed(err error) error {
	return Classify(ClassMalformed, true, false, err)
}

// Error is a handler error with structure: a stable class, whether retrying
// can help, and whether a human can recover a permanent failure.
type Error struct {
	Class       string
	Permanent   bool
	Recoverable bool
	Err         error
}

func (e *Error) Error() string { return e.Class + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as not worth retrying (malformed input, a rule that
// will always reject it). The job fails at once; the failure is marked as
// not recoverable by a human.
func Permanent(err error) error {
	return &Error{Class: ClassPermanent, Permanent: true, Err: err}
}

// Classify wraps err with a class. permanent stops retries; recoverable says
// a human can fix the cause (a credential, a quota) and retry.
func Classify(class string, permanent, recoverable bool, err error) error {
	return &Error{Class: class, Permanent: permanent, Recoverable: recoverable, Err: err}
}

// describe turns a handler error into a failure description; its message
// is stored and shown, so URL secrets are removed from it (redact.Text).
func describe(err error) (f Failure, permanent bool) {
	var we *Error
	if errors.As(err, &we) {
		// The class has its own field; the message is the cause's.
		msg := err.Error()
		if we == err {
			msg = we.Err.Error()
		}
		return Failure{Class: we.Class, Message: redact.Text(msg), Recoverable: we.Recoverable}, we.Permanent
	}
	return Failure{Class: ClassTransient, Message: redact.Text(err.Error()), Recoverable: true}, false
}

type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }
