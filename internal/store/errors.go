package store

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound means the requested item does not exist (for this client).
	ErrNotFound = errors.New("not found")
	// ErrConflict means a compare-and-set lost: the item is no longer in the
	// expected state, or its lease belongs to someone else.
	ErrConflict = errors.New("conflict")
	// ErrIllegalTransition means the state machine has no such edge.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrInvalid means the input is malformed; the message names the field.
	ErrInvalid = errors.New("invalid")
)

// invalid returns an ErrInvalid naming the field and the reason.
func invalid(field, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, reason)
}
