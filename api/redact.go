package api

import (
	"encoding/json"

	"github.com/jervis-dev/jervis/internal/store"
)

// What a client's key reads of the pipeline — event data, a task's or a
// document's error — passes through the Redactor's ForClient: no secret,
// no address of our servers beyond a host name, no stack trace. The
// client's own content (document text, metadata) is theirs and left alone.

func (s *Server) clientText(t string) string { return s.cfg.Redactor.ForClient(t) }

func (s *Server) clientError(e *store.ErrorInfo) *store.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	c.Message = s.clientText(c.Message)
	return &c
}

// clientEvent returns e with every string in its data passed through
// clientText (the JSON is decoded, so the result stays valid JSON).
func (s *Server) clientEvent(e store.Event) store.Event {
	if len(e.Data) == 0 {
		return e
	}
	var v any
	if err := json.Unmarshal(e.Data, &v); err != nil {
		e.Data = nil
		return e
	}
	if b, err := json.Marshal(s.clientValue(v)); err == nil {
		e.Data = b
	}
	return e
}

func (s *Server) clientValue(v any) any {
	switch x := v.(type) {
	case string:
		return s.clientText(x)
	case map[string]any:
		for k, e := range x {
			x[k] = s.clientValue(e)
		}
	case []any:
		for i, e := range x {
			x[i] = s.clientValue(e)
		}
	}
	return v
}

func (s *Server) clientTask(t store.Task) store.Task {
	t.LastError = s.clientError(t.LastError)
	return t
}

func (s *Server) clientDocument(d store.Document) store.Document {
	d.Error = s.clientError(d.Error)
	return d
}
