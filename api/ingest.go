package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// IngestRequest pushes one file as a source, exactly as the file drop and
// `jervis import` take it: the name's extension picks the format (.eml,
// .mbox, .md/.txt, Jira or Confluence REST .json, storage .xhtml/.html).
type IngestRequest struct {
	Name string `json:"name"`
	// Content is the file as text; ContentBase64 as bytes (one of them).
	Content       *string `json:"content,omitempty"`
	ContentBase64 string  `json:"contentBase64,omitempty"`
}

// IngestedDocument is one document the file became (see pollers.Receipt).
type IngestedDocument = pollers.Receipt

func (s *Server) ingest(r *http.Request, p Principal) (any, error) {
	var req IngestRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	var raw []byte
	switch {
	case strings.TrimSpace(req.Name) == "" || len(req.Name) > 512 || strings.ContainsAny(req.Name, "\x00/\\"):
		return nil, invalid("name", "a file name (no path), 1..512 bytes")
	case req.Content != nil && req.ContentBase64 != "":
		return nil, invalid("content", "give content or contentBase64, not both")
	case req.Content != nil:
		raw = []byte(*req.Content)
	default:
		b, err := base64.StdEncoding.DecodeString(req.ContentBase64)
		if err != nil {
			return nil, invalid("contentBase64", "not base64")
		}
		raw = b
	}
	// The same path as a poll and `jervis import`: empty or unparsable
	// content is stored and quarantined with its reason.
	out, err := pollers.Ingester{Store: s.cfg.Store, Kinds: s.cfg.Kinds, Priority: store.PriorityLive}.File(r.Context(), p.Client, "api", req.Name, bytes.NewReader(raw), nil)
	if errors.Is(err, pollers.ErrUnsupported) {
		return nil, invalid("name", "unsupported file type: use "+strings.Join(s.cfg.Kinds.Extensions(), ", "))
	}
	if err != nil {
		return nil, err
	}
	return status{code: http.StatusAccepted, body: items(out)}, nil
}
