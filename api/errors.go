package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jervis-dev/jervis/internal/redact"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
)

// Error is the one error shape of the API: {"error": {...}}.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Error codes.
const (
	CodeInvalid         = "invalid_argument"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeTooLarge        = "too_large"
	CodeRateLimited     = "rate_limited"
	CodeInternal        = "internal"
)

func invalid(field, format string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Field: field, Message: field + ": " + format}
}

func notFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// toError maps an error to the API's error: the one place that decides
// status codes. Internal errors are logged and answered without details.
func toError(err error, log *slog.Logger, r *http.Request) *Error {
	var e *Error
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &tooBig):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: "request body is larger than the limit"}
	case errors.Is(err, store.ErrNotFound), errors.Is(err, graph.ErrNotFound), errors.Is(err, rag.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "not found"}
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrIllegalTransition):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	case errors.Is(err, store.ErrInvalid), errors.Is(err, graph.ErrInvalid), errors.Is(err, rag.ErrInvalid),
		errors.Is(err, kb.ErrBadRef), errors.Is(err, kb.ErrEmptyContent), errors.Is(err, kb.ErrBinary):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Field: fieldOf(err), Message: err.Error()}
	case errors.Is(err, kb.ErrTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: err.Error()}
	}
	log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

// fieldOf reads the field out of the "invalid: FIELD: reason" messages the
// stores write.
func fieldOf(err error) string {
	_, rest, ok := strings.Cut(err.Error(), "invalid: ")
	if !ok {
		return ""
	}
	field, _, ok := strings.Cut(rest, ": ")
	if !ok || strings.ContainsAny(field, " \"") {
		return ""
	}
	return field
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jervis"`)
	}
	c := *e
	c.Message = redact.Text(c.Message) // a refused URL is echoed without its secret
	writeJSON(w, e.Status, map[string]*Error{"error": &c})
}

// decode reads a JSON body into v: unknown fields and trailing data are
// errors naming what is wrong.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return invalid(typeErr.Field, "must be a "+typeErr.Type.String())
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return invalid(strings.Trim(field, `"`), "unknown field")
		}
		return invalid("body", "not valid JSON: "+err.Error())
	}
	if dec.More() {
		return invalid("body", "more than one JSON value")
	}
	return nil
}
