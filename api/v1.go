package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
)

// SearchRequest is the body of POST /api/v1/search (GET takes the same as
// query parameters).
type SearchRequest struct {
	Query   string         `json:"query"`
	Alpha   *float64       `json:"alpha,omitempty"`
	Fusion  string         `json:"fusion,omitempty"`
	Limit   int            `json:"limit,omitempty"`
	Expand  *int           `json:"expand,omitempty"`
	Filters *SearchFilters `json:"filters,omitempty"`
	// Group is what is ranked and limit counts: "item" (default: source
	// items, each with its best passages) or "passage".
	Group string `json:"group,omitempty"`
	// Feedback (default true) also ranks items by the best item's own
	// words when it holds the query (kb's feedback); false: by the query
	// alone.
	Feedback *bool `json:"feedback,omitempty"`
	// Titles (default true) also ranks items by how much of the query
	// their titles hold (kb's title agreement); false: not.
	Titles *bool `json:"titles,omitempty"`
}

// SearchFilters narrow the passages a search may return.
type SearchFilters struct {
	SourceTypes []string `json:"sourceTypes,omitempty"`
	Kinds       []string `json:"kinds,omitempty"`
}

func (s *Server) search(r *http.Request, p Principal) (any, error) {
	var req SearchRequest
	if r.Method == http.MethodPost {
		if err := decode(r, &req); err != nil {
			return nil, err
		}
	} else {
		q := r.URL.Query()
		req.Query, req.Fusion, req.Group = q.Get("query"), q.Get("fusion"), q.Get("group")
		if req.Query == "" {
			req.Query = q.Get("q")
		}
		var err error
		if req.Limit, err = intParam(q, "limit", 0); err != nil {
			return nil, err
		}
		if v := q.Get("alpha"); v != "" {
			a, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, invalid("alpha", "must be a number 0..1")
			}
			req.Alpha = &a
		}
		if req.Feedback, err = boolParam(q, "feedback"); err != nil {
			return nil, err
		}
		if req.Titles, err = boolParam(q, "titles"); err != nil {
			return nil, err
		}
		if q.Has("expand") {
			e, err := intParam(q, "expand", 0)
			if err != nil {
				return nil, err
			}
			req.Expand = &e
		}
		if st := splitList(q.Get("sourceTypes")); len(st) > 0 {
			req.Filters = &SearchFilters{SourceTypes: st}
		}
	}
	switch {
	case req.Query == "":
		return nil, invalid("query", "required")
	case len(req.Query) > 4096:
		return nil, invalid("query", "longer than 4096 bytes")
	case req.Alpha != nil && (*req.Alpha < 0 || *req.Alpha > 1):
		return nil, invalid("alpha", "must be 0..1")
	case req.Fusion != "" && req.Fusion != string(rag.Ranked) && req.Fusion != string(rag.RelativeScore):
		return nil, invalid("fusion", "must be ranked or relativeScore")
	case req.Limit < 0 || req.Limit > 100:
		return nil, invalid("limit", "must be 1..100")
	case req.Group != "" && req.Group != kb.GroupItem && req.Group != kb.GroupPassage:
		return nil, invalid("group", "must be item or passage")
	case req.Expand != nil && (*req.Expand < 0 || *req.Expand > kb.MaxExpand):
		return nil, invalid("expand", "must be 0.."+strconv.Itoa(kb.MaxExpand))
	}
	sr := kb.SearchRequest{Client: p.Client, Query: req.Query, Alpha: req.Alpha, Fusion: rag.Fusion(req.Fusion), Limit: req.Limit, Expand: req.Expand, Group: req.Group,
		NoFeedback: req.Feedback != nil && !*req.Feedback, NoTitles: req.Titles != nil && !*req.Titles}
	if f := req.Filters; f != nil {
		sr.Filter = rag.Filter{SourceTypes: f.SourceTypes, Kinds: f.Kinds}
	}
	return s.cfg.KB.Search(r.Context(), sr)
}

func (s *Server) nodes(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	limit, after, err := pageParams[string](q)
	if err != nil {
		return nil, err
	}
	nq := graph.NodeQuery{Type: q.Get("type"), Prefix: q.Get("q"), Limit: limit}
	if after != nil {
		nq.After = *after
	}
	ns, err := s.cfg.Graph.For(p.Client).ListNodes(r.Context(), nq)
	if err != nil {
		return nil, err
	}
	return page(ns, limit, func(n graph.Node) string { return n.Key }), nil
}

// node returns a node; a ref that is an alias of another (identity
// resolution merged it) returns the node it stands for.
func (s *Server) node(r *http.Request, p Principal) (any, error) {
	g := s.cfg.Graph.For(p.Client)
	n, err := g.Node(r.Context(), r.PathValue("key"))
	if errors.Is(err, graph.ErrNotFound) {
		if ref, perr := kb.ParseRef(r.PathValue("key")); perr == nil {
			if canonical, aerr := s.cfg.Store.ResolveAlias(r.Context(), p.Client, ref.String()); aerr == nil {
				return g.Node(r.Context(), canonical)
			}
		}
	}
	return n, err
}

func (s *Server) neighbors(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	depth, err := intParam(q, "depth", 1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(q, "limit", 0)
	if err != nil {
		return nil, err
	}
	g := s.cfg.Graph.For(p.Client)
	if _, err := g.Node(r.Context(), r.PathValue("key")); err != nil {
		return nil, err
	}
	nq := graph.NeighborQuery{Start: []string{r.PathValue("key")}, Depth: depth, Direction: graph.Direction(q.Get("direction")),
		EdgeTypes: splitList(q.Get("edgeTypes")), Limit: limit}
	if err := nq.Validate(); err != nil {
		return nil, err
	}
	return g.Neighbors(r.Context(), nq)
}

func (s *Server) path(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	maxDepth, err := intParam(q, "maxDepth", 4)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Get("from") == "":
		return nil, invalid("from", "required")
	case q.Get("to") == "":
		return nil, invalid("to", "required")
	case maxDepth < 1 || maxDepth > graph.MaxDepth:
		return nil, invalid("maxDepth", "must be 1.."+strconv.Itoa(graph.MaxDepth))
	}
	return s.cfg.Graph.For(p.Client).ShortestPath(r.Context(), q.Get("from"), q.Get("to"), maxDepth)
}

// EdgeWithEvidence is an edge with the text of the chunks that support it.
type EdgeWithEvidence struct {
	graph.Edge
	Key      string      `json:"key"`
	Evidence []rag.Chunk `json:"evidence"`
}

func (s *Server) edge(r *http.Request, p Principal) (any, error) {
	e, err := s.cfg.Graph.For(p.Client).Edge(r.Context(), r.PathValue("key"))
	if err != nil {
		return nil, err
	}
	chunks, err := s.cfg.Chunks.For(p.Client).Get(r.Context(), e.EvidenceChunkIDs...)
	if err != nil {
		return nil, err
	}
	return EdgeWithEvidence{Edge: e, Key: e.Key(), Evidence: chunks}, nil
}

func (s *Server) chunk(r *http.Request, p Principal) (any, error) {
	chunks, err := s.cfg.Chunks.For(p.Client).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if len(chunks) == 0 {
		return nil, notFound("chunk")
	}
	return chunks[0], nil
}

func (s *Server) documents(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	limit, after, err := pageParams[store.Position](q)
	if err != nil {
		return nil, err
	}
	state := store.DocumentState(q.Get("state"))
	if state != "" && !slices.Contains(store.DocumentStates, state) {
		return nil, invalid("state", "not a document state")
	}
	if urn := q.Get("sourceUrn"); urn != "" {
		// The versions of one item (SOURCETYPE:EXTERNALID, as search items
		// name it), newest first.
		source, external, ok := strings.Cut(urn, ":")
		if !ok || external == "" || !slices.Contains(s.cfg.Kinds.SourceTypes(), store.SourceType(source)) {
			return nil, invalid("sourceUrn", "SOURCETYPE:EXTERNALID, e.g. JIRA:OPS-12")
		}
		docs, err := s.cfg.Store.ListDocumentVersions(r.Context(), p.Client, store.SourceType(source), external)
		if err != nil {
			return nil, err
		}
		slices.Reverse(docs)
		for i, d := range docs {
			d.Raw = nil
			docs[i] = s.clientDocument(d)
		}
		return items(docs), nil
	}
	degraded := false
	if v := q.Get("degraded"); v != "" {
		if degraded, err = strconv.ParseBool(v); err != nil {
			return nil, invalid("degraded", "true or false")
		}
	}
	docs, err := s.cfg.Store.ListDocuments(r.Context(), store.DocumentQuery{Client: p.Client, State: state,
		SourceType: store.SourceType(q.Get("sourceType")), Degraded: degraded, Limit: limit, After: after})
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		docs[i] = s.clientDocument(d)
	}
	return page(docs, limit, func(d store.Document) store.Position { return store.Position{UpdatedAt: d.UpdatedAt, ID: d.ID} }), nil
}

func (s *Server) tasks(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	limit, after, err := pageParams[store.Position](q)
	if err != nil {
		return nil, err
	}
	state, kind := store.TaskState(q.Get("state")), store.TaskKind(q.Get("kind"))
	if state != "" && !slices.Contains(store.TaskStates, state) {
		return nil, invalid("state", "not a task state")
	}
	if kind != "" && kind != store.KindData && kind != store.KindLink {
		return nil, invalid("kind", "not a task kind")
	}
	ts, err := s.cfg.Store.ListTasks(r.Context(), store.TaskQuery{Client: p.Client, State: state, Kind: kind, Limit: limit, After: after})
	if err != nil {
		return nil, err
	}
	for i, t := range ts {
		ts[i] = s.clientTask(t)
	}
	return page(ts, limit, func(t store.Task) store.Position { return store.Position{UpdatedAt: t.UpdatedAt, ID: t.ID} }), nil
}

// pageParams reads limit (1..1000, default 100) and cursor: the position
// after which the page starts, as page wrote it.
func pageParams[P comparable](q url.Values) (int, *P, error) {
	limit, err := intParam(q, "limit", 100)
	if err != nil {
		return 0, nil, err
	}
	if limit < 1 || limit > 1000 {
		return 0, nil, invalid("limit", "must be 1..1000")
	}
	c := q.Get("cursor")
	if c == "" {
		return limit, nil, nil
	}
	var pos, zero P
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || json.Unmarshal(b, &pos) != nil || pos == zero {
		return 0, nil, invalid("cursor", "not a cursor this API gave out")
	}
	return limit, &pos, nil
}

// page wraps a listing, with the next page's cursor (the last item's
// position, opaque to clients) when the page is full.
func page[T, P any](xs []T, limit int, pos func(T) P) list[T] {
	l := items(xs)
	if len(xs) == limit {
		b, _ := json.Marshal(pos(xs[len(xs)-1]))
		l.NextCursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return l
}

func (s *Server) document(r *http.Request, p Principal) (any, error) {
	d, err := s.cfg.Store.GetDocument(r.Context(), p.Client, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	d.Raw = nil // the normalized form is what a UI shows; raw bytes can be large
	return s.clientDocument(d), nil
}

// similar answers GET /api/v1/documents/{id}/similar: the items most like
// the document's, the whole item being the query (kb.Similar).
func (s *Server) similar(r *http.Request, p Principal) (any, error) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", 10)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > 100 {
		return nil, invalid("limit", "must be 1..100")
	}
	d, err := s.cfg.Store.GetDocument(r.Context(), p.Client, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	req := kb.SimilarRequest{Client: p.Client, SourceURN: d.SourceURN(), Title: d.Normalized.Title, Text: d.Normalized.Body, Limit: limit,
		Filter: rag.Filter{SourceTypes: splitList(q.Get("sourceTypes"))}}
	res, err := s.cfg.KB.Similar(r.Context(), req)
	if errors.Is(err, kb.ErrNotIndexed) {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict,
			Message: fmt.Sprintf("document %s is not in the knowledge base (state %s): nothing to compare it by", d.ID, d.State)}
	}
	return res, err
}

// TaskView is a task with its memory and its events.
type TaskView struct {
	store.Task
	Memory *store.TaskMemory `json:"memory,omitempty"`
	Events []store.Event     `json:"events"`
}

func (s *Server) task(r *http.Request, p Principal) (any, error) {
	t, err := s.cfg.Store.GetTask(r.Context(), p.Client, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	v := TaskView{Task: s.clientTask(t)}
	switch mem, err := s.cfg.Store.GetTaskMemory(r.Context(), p.Client, t.ID); {
	case err == nil:
		v.Memory = &mem
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if v.Events, err = s.cfg.Store.ListEvents(r.Context(), store.EventQuery{Client: p.Client, AggregateID: t.ID}); err != nil {
		return nil, err
	}
	for i, e := range v.Events {
		v.Events[i] = s.clientEvent(e)
	}
	return v, nil
}

func intParam(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalid(name, "must be an integer")
	}
	return n, nil
}

// boolParam is query parameter name as a bool (nil when absent).
func boolParam(q url.Values, name string) (*bool, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, invalid(name, "must be true or false")
	}
	return &b, nil
}
