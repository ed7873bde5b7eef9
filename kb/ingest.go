package kb

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embed"
	"github.com/jervis-dev/jervis/kb/graph"
	"github.com/jervis-dev/jervis/kb/rag"
)

// Errors Ingest returns for content it will not index.
var (
	ErrEmptyContent = errors.New("content is empty")
	ErrBinary       = errors.New("content is not text")
	ErrTooLarge     = errors.New("content is too large")
)

// Confidence by origin, for edges whose caller does not set one.
const (
	ConfidenceMetadata = 1.0
	ConfidenceSyntax   = 0.9
	ConfidenceMention  = 0.6
	embedBatch         = 64
)

// Config wires a KB.
type Config struct {
	Graph    graph.Store
	Chunks   rag.Store
	Embedder embed.Embedder
	Aliases  store.Aliases
	// Encoders keeps the clients' own encoders (TrainEncoder; nil: every
	// client's texts are embedded by Embedder, and none can be trained).
	Encoders store.Encoders
	// Words weighs words for search's feedback (default: the embedder,
	// when it is an embed.WordWeigher; else every word weighs the same).
	Words embed.WordWeigher
	// MaxContentBytes refuses bigger documents (default 16 MiB).
	MaxContentBytes int
	// Logger says what the KB works around (default slog.Default()).
	Logger *slog.Logger
}

// KB is the knowledge base: ingest and search over one graph and one chunk
// store, per client.
type KB struct {
	graph    graph.Store
	chunks   rag.Store
	embedder embed.Embedder
	resolver *Resolver
	maxBytes int
	weigh    func(string) float64 // nil: every word weighs the same
	common   commons              // the clients' common directions (commons.go)
	// encoderStore keeps the clients' own encoders; enc is what this KB
	// knows of them (encoder.go).
	encoderStore store.Encoders
	enc          encoders
	log          *slog.Logger
}

// New returns a KB. A chunk store that builds an approximate vector index
// (rag.QuerySpace) is told how many common directions search takes out of
// a query (embed.CommonRemover; queryVector).
func New(cfg Config) *KB {
	k := &KB{
		graph: cfg.Graph, chunks: cfg.Chunks, embedder: cfg.Embedder, resolver: NewResolver(cfg.Aliases),
		maxBytes: cmp.Or(cfg.MaxContentBytes, 16<<20), encoderStore: cfg.Encoders, log: cmp.Or(cfg.Logger, slog.Default()),
	}
	words := cfg.Words
	if w, ok := cfg.Embedder.(embed.WordWeigher); ok && words == nil {
		words = w
	}
	if words != nil {
		k.weigh = words.WordWeight
	}
	if qs, ok := cfg.Chunks.(rag.QuerySpace); ok {
		if cr, ok := cfg.Embedder.(embed.CommonRemover); ok {
			qs.SetCommonComponents(cr.CommonComponents())
		}
	}
	return k
}

// Indexed reports whether the client has chunks of sourceURN.
func (k *KB) Indexed(ctx context.Context, client, sourceURN string) (bool, error) {
	ids, err := k.chunks.For(client).SourceChunkIDs(ctx, sourceURN)
	return len(ids) > 0, err
}

// Wipe deletes a client's whole projection — chunks, then graph — so that
// reprocessing its source documents rebuilds it from nothing.
func (k *KB) Wipe(ctx context.Context, client string) error {
	if err := k.chunks.For(client).Drop(ctx); err != nil {
		return fmt.Errorf("wipe %s chunks: %w", client, err)
	}
	if err := k.graph.For(client).Drop(ctx); err != nil {
		return fmt.Errorf("wipe %s graph: %w", client, err)
	}
	return nil
}

// Resolver returns the KB's ref resolver.
func (k *KB) Resolver() *Resolver { return k.resolver }

// Graph returns the graph store the KB writes.
func (k *KB) Graph() graph.Store { return k.graph }

// Chunks returns the chunk store the KB writes.
func (k *KB) Chunks() rag.Store { return k.chunks }

// MetaRelation is a relationship a caller knows from structured fields (an
// email's sender, a Jira assignee). Evidence, when set, is text of Content
// that supports it; the chunk holding it becomes the edge's evidence (the
// first chunk otherwise).
type MetaRelation struct {
	From, Type, To string
	Origin         graph.Origin // default metadata
	Confidence     float64      // default by origin
	Evidence       string
}

// IngestRequest is one source version to index.
type IngestRequest struct {
	Client   string
	MainNode string         // ref of the document's own node, e.g. jira:TASK-123
	Props    map[string]any // properties of the main node
	// Title is the item's title (an issue's summary, a mail's subject):
	// every chunk carries it, as a search field weighted above the text and
	// in what its vector is computed from.
	Title string
	// Header is the item's metadata as lines ("From: Ann <ann@acme.test>"),
	// the evidence of Relations: it is chunked apart from Content, never
	// packed with body text.
	Header     string
	Content    string
	Relations  []MetaRelation
	SourceURN  string // identifies the source; a new version replaces its chunks (default MainNode)
	SourceType string // EMAIL, JIRA, ...
	Kind       string // chunk kind, e.g. "body"
	ObservedAt time.Time
	// MentionsOnly leaves relationship syntax in Content unparsed (refs it
	// names still count as mentions): for text that reports on the graph,
	// such as an executor's result, whose "a -[type]-> b" lines are not
	// claims of its own.
	MentionsOnly bool
	// MentionNamespaces, when not nil, are the only namespaces whose
	// type:id mentions in prose become nodes ("inet addr:10.0.0.1" in pasted
	// terminal output is not an entity). Relationship syntax (a|rel|b) is
	// not limited by it. nil: every namespace.
	MentionNamespaces []string
}

// IngestResult reports what Ingest wrote.
type IngestResult struct {
	MainNode      string        `json:"mainNode"`
	Nodes         []string      `json:"nodes"`
	Edges         []string      `json:"edges"`
	Chunks        []string      `json:"chunks"`
	RemovedChunks int           `json:"removedChunks"`
	Removed       graph.Removed `json:"removed"`
	// Warnings say what was left out or changed so that the rest could be
	// ingested: a relation that cannot be stored (a bad ref or edge type),
	// control characters removed from the content.
	Warnings []string `json:"warnings,omitempty"`
	// Aliased are the refs the content named that the alias registry
	// replaced (Nodes holds what they stand for).
	Aliased []string `json:"aliased,omitempty"`
}

// chunkNamespace seeds chunk UUIDs (UUIDv5).
var chunkNamespace = uuid.MustParse("6f0e7d0a-3f7c-5e58-9d0e-4a1b2c3d4e5f")

// ChunkID returns the deterministic ID of a chunk:
// UUIDv5(client | nodeKey | ordinal | hash of the chunk's text).
func ChunkID(client, nodeKey string, ordinal int, text string) string {
	sum := sha256.Sum256([]byte(text))
	return uuid.NewSHA1(chunkNamespace, fmt.Appendf(nil, "%s|%s|%d|%s", client, nodeKey, ordinal, hex.EncodeToString(sum[:]))).String()
}

func defaultConfidence(o graph.Origin) float64 {
	switch o {
	case graph.OriginMetadata, graph.OriginUser:
		return ConfidenceMetadata
	case graph.OriginSyntax:
		return ConfidenceSyntax
	}
	return 0.7 // llm
}

// maxControlShare is the share of control characters above which content
// is taken for binary data; below it they are removed (pasted terminal
// output carries backspaces and escapes that mean nothing in text).
const maxControlShare = 0.25

// cleanContent refuses content Ingest cannot index, with the reason, and
// returns it without control characters other than tab, line feed, carriage
// return and form feed, and how many it removed.
func (k *KB) cleanContent(s string) (string, int, error) {
	switch {
	case len(s) > k.maxBytes:
		return s, 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(s), k.maxBytes)
	case strings.TrimSpace(s) == "":
		return s, 0, ErrEmptyContent
	case !utf8.ValidString(s):
		return s, 0, fmt.Errorf("%w: invalid UTF-8", ErrBinary)
	}
	control := 0
	for _, r := range s {
		if isStrayControl(r) {
			control++
		}
	}
	if control == 0 {
		return s, 0, nil
	}
	if float64(control) > maxControlShare*float64(utf8.RuneCountInString(s)) {
		return s, 0, fmt.Errorf("%w: %d control characters", ErrBinary, control)
	}
	s = stripControl(s)
	if strings.TrimSpace(s) == "" {
		return s, 0, ErrEmptyContent
	}
	return s, control, nil
}

// stripControl removes stray control characters.
func stripControl(s string) string {
	return strings.Map(func(r rune) rune {
		if isStrayControl(r) {
			return -1
		}
		return r
	}, s)
}

func isStrayControl(r rune) bool {
	return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' && r != '\f'
}

// Ingest indexes one source version: it chunks the content, finds
// relationships and mentions, resolves every ref, embeds the chunks, stores
// them with their graph refs, upserts nodes (with their chunks) and edges
// (with the chunks that support them), and finally drops what an earlier
// version of the same source had and this one does not. The order makes a
// crash at any point harmless: running Ingest again completes it.
// Ingesting the same content again changes nothing.
func (k *KB) Ingest(ctx context.Context, req IngestRequest) (IngestResult, error) {
	p, err := k.prepare(ctx, req)
	if err != nil {
		return p.failed(), err
	}
	if err := k.embed(ctx, []*prepared{p}); err != nil {
		return p.failed(), err
	}
	if err := k.write(ctx, []*prepared{p}); err != nil {
		return p.failed(), err
	}
	return p.res, nil
}

// IngestBatch ingests many source versions as Ingest does each, with their
// writes together: the chunks of all of them in one upsert, their nodes in
// one, their edges in one (per client), so that a bulk of small documents
// costs a few transactions instead of three each. Results and errors are
// by request: a request that cannot be ingested (the errors Ingest
// returns) costs only itself — when the writes together fail, each request
// is written alone to find which. Versions of one source in one batch are
// written one after the other, in order.
func (k *KB) IngestBatch(ctx context.Context, reqs []IngestRequest) ([]IngestResult, []error) {
	results, errs := make([]IngestResult, len(reqs)), make([]error, len(reqs))
	ps := make([]*prepared, 0, len(reqs))
	at := make([]int, 0, len(reqs)) // ps[i] is reqs[at[i]]
	refs := map[string][]string{}   // client → the refs its requests name
	for i, req := range reqs {
		p, err := k.parse(req)
		if err != nil {
			results[i], errs[i] = p.failed(), err
			continue
		}
		refs[req.Client] = append(refs[req.Client], p.refs()...)
		ps, at = append(ps, p), append(at, i)
	}
	for client, keys := range refs { // looked up together, not one by one
		if err := k.resolver.Prefetch(ctx, client, keys); err != nil {
			for j, i := range at {
				results[i], errs[i] = ps[j].failed(), err
			}
			return results, errs
		}
	}
	built := ps[:0]
	for j, p := range ps {
		if err := k.build(ctx, p); err != nil {
			results[at[j]], errs[at[j]] = p.failed(), err
			continue
		}
		built, at[len(built)] = append(built, p), at[j]
	}
	ps, at = built, at[:len(built)]
	if err := k.embed(ctx, ps); err != nil {
		for j, i := range at {
			results[i], errs[i] = ps[j].failed(), err
		}
		return results, errs
	}
	// Rounds: a source's second version in the batch waits for the next
	// round (its stale chunks are the first version's).
	done := make([]bool, len(ps))
	for left := len(ps); left > 0; {
		var round []*prepared
		var idx []int
		seen := map[[2]string]bool{}
		for j, p := range ps {
			key := [2]string{p.req.Client, p.sourceURN}
			if done[j] || seen[key] {
				continue
			}
			seen[key] = true
			round, idx = append(round, p), append(idx, j)
		}
		if err := k.write(ctx, round); err != nil {
			for n, p := range round { // find which: each alone
				errs[at[idx[n]]] = k.write(ctx, []*prepared{p})
			}
		}
		for n, j := range idx {
			done[j], results[at[j]] = true, round[n].res
			if errs[at[j]] != nil {
				results[at[j]] = round[n].failed()
			}
		}
		left -= len(round)
	}
	return results, errs
}

// prepared is one request made ready to write: its chunks (vectors once
// embedded), nodes and edges.
type prepared struct {
	req       IngestRequest
	res       IngestResult
	sourceURN string
	parsed    *parsed  // until built
	texts     []string // what the chunks' vectors are computed from
	chunks    []rag.Chunk
	nodes     []graph.Node
	edges     []graph.Edge
}

// failed is what Ingest returns with an error: the main node, warnings
// and aliases, nothing said written.
func (p *prepared) failed() IngestResult {
	return IngestResult{MainNode: p.res.MainNode, Warnings: p.res.Warnings, Aliased: p.res.Aliased}
}

// prepare does everything of Ingest but embedding and writing: it cleans
// and chunks the content, finds relationships and mentions and resolves
// their refs.
func (k *KB) prepare(ctx context.Context, req IngestRequest) (*prepared, error) {
	p, err := k.parse(req)
	if err != nil {
		return p, err
	}
	if err := k.resolver.Prefetch(ctx, req.Client, p.refs()); err != nil {
		return p, err
	}
	return p, k.build(ctx, p)
}

// parsed is a request cleaned, chunked and read for relationships and
// mentions, its refs not resolved yet.
type parsed struct {
	full      string // the content cleaned, after the header
	spans     []Span
	headSpans int
	title     string
	main      Ref // as written
	found     []Found
	mentions  []Mention
}

// parse cleans and chunks req's content and reads its relationships and
// mentions (against its main node as written).
func (k *KB) parse(req IngestRequest) (*prepared, error) {
	p := &prepared{req: req}
	res := &p.res
	if err := store.ValidateClientID(req.Client); err != nil {
		return p, err
	}
	full := req.Content
	if req.Header != "" {
		full = req.Header + "\n\n" + req.Content
	}
	full, removed, err := k.cleanContent(full)
	if err != nil {
		return p, err
	}
	if removed > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d control characters removed from the content", removed))
	}
	// The header's chunks come first, then the body's, with offsets into
	// the whole text (header, blank line, body) that relations are read
	// from.
	var spans []Span
	headSpans := 0
	if req.Header != "" {
		header := stripControl(req.Header)
		spans = Chunk(header)
		headSpans = len(spans)
		for _, sp := range Chunk(full[min(len(full), len(header)+2):]) {
			sp.Start, sp.End = sp.Start+len(header)+2, sp.End+len(header)+2
			spans = append(spans, sp)
		}
	} else {
		spans = Chunk(full)
	}
	main, err := ParseRef(req.MainNode)
	if err != nil {
		return p, fmt.Errorf("main node: %w", err)
	}
	p.parsed = &parsed{full: full, spans: spans, headSpans: headSpans, title: strings.TrimSpace(stripControl(req.Title)), main: main}
	p.parsed.found, p.parsed.mentions = p.relations(main)
	return p, nil
}

// relations reads p's relationships and mentions against main.
func (p *prepared) relations(main Ref) ([]Found, []Mention) {
	found, mentions := ParseRelations(p.parsed.full, main)
	if p.req.MentionsOnly {
		for _, f := range found {
			for _, s := range []string{f.From, f.To} {
				if r, err := ParseRef(s); err == nil {
					mentions = append(mentions, Mention{Ref: r, Offset: f.Offset})
				}
			}
		}
		found = nil
	}
	return found, mentions
}

// refs are the refs p's build resolves: its main node, its
// relationships' ends, its mentions and its relations' ends, as written
// (normalised; those that cannot be refs left out).
func (p *prepared) refs() []string {
	var out []string
	add := func(s string) {
		if r, err := ParseRef(s); err == nil {
			out = append(out, r.String())
		}
	}
	out = append(out, p.parsed.main.String())
	for _, f := range p.parsed.found {
		add(f.From)
		add(f.To)
	}
	for _, m := range p.parsed.mentions {
		if p.req.MentionNamespaces == nil || slices.Contains(p.req.MentionNamespaces, m.Ref.Namespace) {
			out = append(out, m.Ref.String())
		}
	}
	for _, mr := range p.req.Relations {
		add(mr.From)
		add(mr.To)
	}
	return out
}

// build resolves the refs p names and makes its chunks, nodes and edges.
func (k *KB) build(ctx context.Context, p *prepared) error {
	req, res := p.req, &p.res
	req.Content = p.parsed.full
	spans, headSpans, title := p.parsed.spans, p.parsed.headSpans, p.parsed.title
	main, err := k.resolver.Resolve(ctx, req.Client, req.MainNode)
	if err != nil {
		return fmt.Errorf("main node: %w", err)
	}
	res.MainNode = main.String()
	p.sourceURN = cmp.Or(req.SourceURN, main.String())
	observed := req.ObservedAt
	if observed.IsZero() {
		observed = time.Now()
	}
	observed = observed.UTC().Truncate(time.Microsecond)

	starts := make([]int, len(spans))
	for i, s := range spans {
		starts[i] = s.Start
	}
	chunkAt := func(offset int) int { // the last chunk starting at or before offset
		return max(0, sort.SearchInts(starts, offset+1)-1)
	}

	// Relationships and mentions, resolved through aliases (read again
	// against the main node it stands for when that is an alias).
	found, mentions := p.parsed.found, p.parsed.mentions
	if main != p.parsed.main {
		found, mentions = p.relations(main)
	}
	type edgeAt struct {
		graph.Edge
		chunk int
	}
	var edges []edgeAt
	refChunks := map[string]map[int]bool{} // node key → chunks it appears in
	addRef := func(key string, chunk int) {
		if refChunks[key] == nil {
			refChunks[key] = map[int]bool{}
		}
		refChunks[key][chunk] = true
	}
	resolve := func(s string) (string, error) {
		r, err := k.resolver.Resolve(ctx, req.Client, s)
		if err == nil {
			if written, _ := ParseRef(s); written != r && !slices.Contains(res.Aliased, written.String()) {
				res.Aliased = append(res.Aliased, written.String())
			}
		}
		return r.String(), err
	}
	for _, f := range found {
		from, err1 := resolve(f.From)
		to, err2 := resolve(f.To)
		if err := errors.Join(err1, err2); errors.Is(err, ErrBadRef) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("relation %s|%s|%s left out: %v", f.From, f.Type, f.To, err))
			continue
		} else if err != nil {
			return err
		}
		c := chunkAt(f.Offset)
		addRef(from, c)
		addRef(to, c)
		edges = append(edges, edgeAt{graph.Edge{Type: f.Type, From: from, To: to, Confidence: ConfidenceSyntax, Origin: graph.OriginSyntax}, c})
	}
	for _, m := range mentions {
		if req.MentionNamespaces != nil && !slices.Contains(req.MentionNamespaces, m.Ref.Namespace) {
			continue
		}
		key, err := resolve(m.Ref.String())
		if errors.Is(err, ErrBadRef) {
			continue
		}
		if err != nil {
			return err
		}
		c := chunkAt(m.Offset)
		addRef(key, c)
		if key != main.String() {
			edges = append(edges, edgeAt{graph.Edge{Type: "mentions", From: main.String(), To: key, Confidence: ConfidenceMention, Origin: graph.OriginSyntax}, c})
		}
	}
	for _, mr := range req.Relations {
		// One relation that cannot be stored is left out with a warning;
		// the rest of the document is ingested.
		from, err1 := resolve(mr.From)
		to, err2 := resolve(mr.To)
		typ, err3 := EdgeType(mr.Type)
		if err := errors.Join(err1, err2, err3); err != nil {
			if !errors.Is(err, ErrBadRef) && !errors.Is(err, graph.ErrInvalid) {
				return fmt.Errorf("relation %s|%s|%s: %w", mr.From, mr.Type, mr.To, err)
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("relation %s|%s|%s left out: %v", clip(mr.From), clip(mr.Type), clip(mr.To), err))
			continue
		}
		origin := cmp.Or(mr.Origin, graph.OriginMetadata)
		conf := cmp.Or(mr.Confidence, defaultConfidence(origin))
		c := 0
		if mr.Evidence != "" {
			if at := strings.Index(req.Content, mr.Evidence); at >= 0 {
				c = chunkAt(at)
			}
		}
		addRef(from, c)
		addRef(to, c)
		edges = append(edges, edgeAt{graph.Edge{Type: typ, From: from, To: to, Confidence: conf, Origin: origin}, c})
	}

	// Chunks: IDs, graph refs; vectors come from embed.
	ids := make([]string, len(spans))
	chunkRefs := make([][]string, len(spans))
	for i, s := range spans {
		ids[i] = ChunkID(req.Client, main.String(), i, s.Text)
		chunkRefs[i] = []string{main.String()}
	}
	for key, cs := range refChunks {
		for c := range cs {
			if key != main.String() {
				chunkRefs[c] = append(chunkRefs[c], key)
			}
		}
	}
	p.texts = make([]string, len(spans))
	p.chunks = make([]rag.Chunk, len(spans))
	for i, s := range spans {
		switch {
		case title == "":
			p.texts[i] = s.Text
		case i == 0 && headSpans > 0:
			// The header's (first) chunk is the item's title as a
			// vector: header lines (names, keys, dates) only blur it,
			// and a query typed as a title finds the item by it
			// (vectors-only duplicates on the dev Jira corpus 0.142 →
			// 0.196 recall@10). Its text, which BM25 reads, keeps the
			// header lines.
			p.texts[i] = title
		default:
			p.texts[i] = title + "\n" + s.Text
		}
		slices.Sort(chunkRefs[i][1:])
		p.chunks[i] = rag.Chunk{
			ID: ids[i], Text: s.Text, Title: title, GraphRefs: chunkRefs[i], SourceURN: p.sourceURN, SourceType: req.SourceType,
			Kind: req.Kind, NodeKey: main.String(), Timestamp: observed,
		}
	}

	// Graph: nodes with their chunks, then edges with their evidence.
	p.nodes = []graph.Node{{Key: main.String(), Type: main.Namespace, Props: req.Props, RAGChunks: ids, FirstSeen: observed, LastSeen: observed}}
	keys := make([]string, 0, len(refChunks))
	for key := range refChunks {
		if key != main.String() {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		ns, _, _ := strings.Cut(key, ":")
		n := graph.Node{Key: key, Type: ns, FirstSeen: observed, LastSeen: observed}
		for c := range refChunks[key] {
			n.RAGChunks = append(n.RAGChunks, ids[c])
		}
		slices.Sort(n.RAGChunks)
		p.nodes = append(p.nodes, n)
	}
	seenEdge := map[string]int{}
	for _, e := range edges {
		e.EvidenceChunkIDs = []string{ids[e.chunk]}
		e.FirstSeen, e.LastSeen = observed, observed
		if i, dup := seenEdge[e.Key()]; dup { // the same edge twice: merge evidence
			mergeEdge(&p.edges[i], e.Edge)
			continue
		}
		seenEdge[e.Key()] = len(p.edges)
		p.edges = append(p.edges, e.Edge)
	}
	for _, n := range p.nodes {
		res.Nodes = append(res.Nodes, n.Key)
	}
	for _, e := range p.edges {
		res.Edges = append(res.Edges, e.Key())
	}
	res.Chunks = ids
	p.parsed = nil
	return nil
}

// mergeEdge merges e into into, as a second upsert of the same edge would:
// evidence joined, the higher confidence kept with its origin, seen times
// widened, props overlaid.
func mergeEdge(into *graph.Edge, e graph.Edge) {
	into.EvidenceChunkIDs = slices.Clone(into.EvidenceChunkIDs) // never the list of what was merged
	for _, c := range e.EvidenceChunkIDs {
		if !slices.Contains(into.EvidenceChunkIDs, c) {
			into.EvidenceChunkIDs = append(into.EvidenceChunkIDs, c)
		}
	}
	if e.Confidence > into.Confidence {
		into.Confidence, into.Origin = e.Confidence, e.Origin
	}
	into.FirstSeen, into.LastSeen = earliest(into.FirstSeen, e.FirstSeen), latest(into.LastSeen, e.LastSeen)
	into.Props = overlay(into.Props, e.Props)
}

// mergeNode merges n into into, as a second upsert of the same node would.
func mergeNode(into *graph.Node, n graph.Node) {
	into.RAGChunks = slices.Clone(into.RAGChunks) // never a request's own list
	for _, c := range n.RAGChunks {
		if !slices.Contains(into.RAGChunks, c) {
			into.RAGChunks = append(into.RAGChunks, c)
		}
	}
	slices.Sort(into.RAGChunks)
	into.FirstSeen, into.LastSeen = earliest(into.FirstSeen, n.FirstSeen), latest(into.LastSeen, n.LastSeen)
	into.Props = overlay(into.Props, n.Props)
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// overlay returns a's props with b's written over them (a new map when b
// has any), as a JSON merge patch of b applied after a's would leave them:
// nested objects merge, a null stays to remove the key.
func overlay(a, b map[string]any) map[string]any {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		bm, bok := v.(map[string]any)
		am, aok := out[k].(map[string]any)
		if aok && bok {
			v = overlay(am, bm)
		}
		out[k] = v
	}
	return out
}

// embed computes the vectors of the prepared requests' chunks, in batches
// across requests, by the embedder of each request's client.
func (k *KB) embed(ctx context.Context, ps []*prepared) error {
	var clients []string
	byClient := map[string][]*prepared{}
	for _, p := range ps {
		if _, ok := byClient[p.req.Client]; !ok {
			clients = append(clients, p.req.Client)
		}
		byClient[p.req.Client] = append(byClient[p.req.Client], p)
	}
	for _, client := range clients {
		e, err := k.embedderFor(ctx, client)
		if err != nil {
			return fmt.Errorf("embed: %w", err)
		}
		ps := byClient[client]
		var texts []string
		for _, p := range ps {
			texts = append(texts, p.texts...)
		}
		vectors := make([][]float32, 0, len(texts))
		for lo := 0; lo < len(texts); lo += embedBatch {
			vs, err := e.Embed(ctx, texts[lo:min(len(texts), lo+embedBatch)])
			if err != nil {
				return fmt.Errorf("embed: %w", err)
			}
			vectors = append(vectors, vs...)
		}
		if len(vectors) != len(texts) {
			return fmt.Errorf("embed: %d vectors for %d chunks", len(vectors), len(texts))
		}
		for _, p := range ps {
			for i := range p.chunks {
				p.chunks[i].Vector = vectors[i]
			}
			vectors = vectors[len(p.chunks):]
		}
	}
	return nil
}

// write stores prepared requests, by client: their chunks in one upsert,
// nodes (merged by key) in one, edges (merged by key) in one, then what
// each source's previous version had and this one does not goes. No two
// of ps may be versions of one source.
func (k *KB) write(ctx context.Context, ps []*prepared) error {
	var clients []string
	byClient := map[string][]*prepared{}
	for _, p := range ps {
		if byClient[p.req.Client] == nil {
			clients = append(clients, p.req.Client)
		}
		byClient[p.req.Client] = append(byClient[p.req.Client], p)
	}
	for _, client := range clients {
		if err := k.writeClient(ctx, client, byClient[client]); err != nil {
			return err
		}
	}
	return nil
}

func (k *KB) writeClient(ctx context.Context, client string, ps []*prepared) error {
	index := k.chunks.For(client)
	urns := make([]string, len(ps))
	for i, p := range ps {
		urns[i] = p.sourceURN
	}
	previous, err := index.SourcesChunkIDs(ctx, urns)
	if err != nil {
		return err
	}
	var chunks []rag.Chunk
	var nodes []graph.Node
	var edges []graph.Edge
	nodeAt := map[string]int{}
	for _, p := range ps {
		chunks = append(chunks, p.chunks...)
		for _, n := range p.nodes {
			if j, ok := nodeAt[n.Key]; ok {
				mergeNode(&nodes[j], n)
				continue
			}
			nodeAt[n.Key] = len(nodes)
			nodes = append(nodes, n)
		}
		edges = append(edges, p.edges...)
	}
	if err := index.Upsert(ctx, chunks...); err != nil {
		return fmt.Errorf("store chunks: %w", err)
	}
	// In key order (each key is once in the batch): the B-trees keyed by
	// them are then written from one end to the other, a page once, where
	// at random a page the writer's cache let go during the transaction
	// was read and written again.
	slices.SortFunc(nodes, func(a, b graph.Node) int { return strings.Compare(a.Key, b.Key) })
	edges = edgesByKey(edges)
	g := k.graph.For(client)
	if err := g.UpsertNodes(ctx, nodes...); err != nil {
		return fmt.Errorf("store nodes: %w", err)
	}
	if err := g.UpsertEdges(ctx, edges...); err != nil {
		// An end merged into another node since the batch's refs were
		// resolved (the identity loop's MergeNode, between this batch's
		// nodes and its edges): the edges again, their ends as the alias
		// registry names them now. Without this the whole batch was written
		// again a request at a time (IngestBatch), each request's nodes
		// bringing the merged node back: at 100,000 synthetic documents, 5
		// batches of 358–547 requests (BENCHMARKS.md, forty-third round).
		again, moved := k.endsNow(ctx, client, edges)
		if !moved || !errors.Is(err, graph.ErrNotFound) {
			return fmt.Errorf("store edges: %w", err)
		}
		if err := g.UpsertEdges(ctx, again...); err != nil {
			return fmt.Errorf("store edges: %w", err)
		}
	}
	for _, p := range ps {
		if err := k.removeStale(ctx, client, p, previous[p.sourceURN]); err != nil {
			return err
		}
	}
	return nil
}

// edgesByKey merges the edges that share a key, as a second upsert of one
// would, and returns them in key order: the B-trees keyed by them are then
// written from one end to the other (writeClient).
func edgesByKey(edges []graph.Edge) []graph.Edge {
	type keyed struct {
		key  string
		edge graph.Edge
	}
	out := make([]keyed, 0, len(edges))
	at := make(map[string]int, len(edges))
	for _, e := range edges {
		key := e.Key()
		if j, ok := at[key]; ok {
			mergeEdge(&out[j].edge, e)
			continue
		}
		at[key] = len(out)
		out = append(out, keyed{key, e})
	}
	slices.SortFunc(out, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	sorted := make([]graph.Edge, len(out))
	for i := range out {
		sorted[i] = out[i].edge
	}
	return sorted
}

// endsNow returns edges with each end as the alias registry resolves it
// now (edgesByKey: those that come to share a key merged, in key order),
// and whether any end changed. One whose ends become one node is left
// out, as MergeNode drops it.
func (k *KB) endsNow(ctx context.Context, client string, edges []graph.Edge) ([]graph.Edge, bool) {
	now := func(key string) string { return k.resolver.canonical(ctx, client, []string{key})[0] }
	moved := false
	out := make([]graph.Edge, 0, len(edges))
	for _, e := range edges {
		if from, to := now(e.From), now(e.To); from != e.From || to != e.To {
			moved = true
			if from == to {
				continue
			}
			e.From, e.To = from, to
		}
		out = append(out, e)
	}
	return edgesByKey(out), moved
}

// held names where each chunk of ids may be held in the graph (graph.Held):
// its own node, then its graph refs, each also as the alias registry
// resolves it now (a node merged since holds what its alias held; the
// embedded graph follows the merges it recorded itself, the registry
// covers those from before). A chunk the chunk store no longer has is
// looked for on the source's node, main.
func (k *KB) held(ctx context.Context, client, main string, ids []string) ([]graph.Held, error) {
	chunks, err := k.chunks.For(client).Get(ctx, ids...)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]rag.Chunk, len(chunks))
	for _, c := range chunks {
		byID[c.ID] = c
	}
	held := make([]graph.Held, len(ids))
	for i, id := range ids {
		written := []string{main}
		if c, ok := byID[id]; ok {
			written = append([]string{c.NodeKey}, c.GraphRefs...)
		}
		now := k.resolver.canonical(ctx, client, written)
		nodes := []string{now[0]}
		for _, key := range slices.Concat(written, now) {
			if !slices.Contains(nodes, key) {
				nodes = append(nodes, key)
			}
		}
		held[i] = graph.Held{ChunkID: id, Nodes: nodes}
	}
	return held, nil
}

// removeStale drops what the source's previous version had (previous) and
// p's does not.
func (k *KB) removeStale(ctx context.Context, client string, p *prepared, previous []string) error {
	var stale []string
	for _, id := range previous {
		if !slices.Contains(p.res.Chunks, id) {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	held, err := k.held(ctx, client, p.res.MainNode, stale)
	if err != nil {
		return fmt.Errorf("remove stale evidence: %w", err)
	}
	if p.res.Removed, err = k.graph.For(client).RemoveEvidence(ctx, held); err != nil {
		return fmt.Errorf("remove stale evidence: %w", err)
	}
	if p.res.RemovedChunks, err = k.chunks.For(client).Delete(ctx, stale...); err != nil {
		return fmt.Errorf("remove stale chunks: %w", err)
	}
	return nil
}
