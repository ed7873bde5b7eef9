package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers/filedrop"
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

// IngestedDocument is one document the file became.
type IngestedDocument struct {
	ID         string           `json:"id"`
	SourceType store.SourceType `json:"sourceType"`
	ExternalID string           `json:"externalId"`
	Version    int              `json:"version"`
	Created    bool             `json:"created"` // false: this content was already stored
	State      string           `json:"state"`
	// Unparsable says why the content could not be parsed: the document is
	// stored all the same and will be quarantined with this reason.
	Unparsable string `json:"unparsable,omitempty"`
}

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
	docs, err := filedrop.Parse(req.Name, raw) // empty content: stored, quarantined with the reason
	if errors.Is(err, filedrop.ErrUnsupported) {
		return nil, invalid("name", "unsupported file type: use .eml, .mbox, .md, .txt, .json (Jira or Confluence REST), .xhtml or .html")
	}
	if err != nil {
		return nil, err
	}
	out := make([]IngestedDocument, 0, len(docs))
	for _, d := range docs {
		d.Client, d.Connection = p.Client, "api"
		stored, created, err := s.cfg.Store.PutDocument(r.Context(), d)
		if err != nil {
			return nil, err
		}
		reason, _ := d.Normalized.Metadata[store.MetaParseError].(string)
		out = append(out, IngestedDocument{ID: stored.ID, SourceType: stored.SourceType, ExternalID: stored.ExternalID, Version: stored.Version,
			Created: created, State: string(stored.State), Unparsable: reason})
	}
	return status{code: http.StatusAccepted, body: items(out)}, nil
}
