// Package weaviate is the production chunk backend: one Weaviate class with
// native multi-tenancy (a tenant per client, created on first use),
// vectorizer none with Jervis's own vectors, BM25 on the text's stems,
// filterable metadata (only what is read is indexed: textProps), batch upserts under deterministic UUIDs, hybrid search with
// Weaviate's own fusion, deletes by source, node or ID.
//
// Queries are GraphQL written here (the client's Raw query) so that every
// argument is escaped in one place; writes go through the client's typed
// batch and schema APIs, or, with a gRPC address, Weaviate's own gRPC
// batch service on a connection of this store's (see Config.GRPC).
//
// Differences from the embedded backend, which ragtest records as
// capabilities: Weaviate's BM25 tokenizes words (lower-cased, split on
// anything not a letter or digit) without stemming and without folding
// accents, and its scores are float32. Stemming and folding are done here: each chunk
// also carries its text and title as English Snowball stems (properties
// stemmed and stemmedTitle, searchable, not stored for filters), and BM25
// reads those with the query's stems, so that "crashes" finds "crash" as
// in the embedded store (on the dev Jira corpus's duplicates, recall@10
// rose by about 0.05). Objects written by a version without them have
// them empty, and BM25 finds them only once reprocessed.
package weaviate

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	"github.com/weaviate/weaviate-go-client/v4/weaviate"
	"github.com/weaviate/weaviate-go-client/v4/weaviate/filters"
	"github.com/weaviate/weaviate/entities/models"
	pb "github.com/weaviate/weaviate/grpc/generated/protocol/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jervis-dev/jervis/kb/rag"
)

// DefaultClass is the Weaviate class holding every client's chunks.
const DefaultClass = "JervisChunk"

// Config locates the server.
type Config struct {
	URL   string // e.g. http://127.0.0.1:8080
	Class string // default DefaultClass
	// GRPC is the server's gRPC address (host:port, e.g. weaviate:50051):
	// batch writes go over it, TLS when URL is https (the server's
	// certificate verified, as REST's is); empty, they go over REST.
	// Weaviate decodes a batch's protocol buffers for less than its JSON:
	// the dev Jira corpus went in 29.7 → 26.1 s on two cores.
	//
	// The batches go on a connection of this store's, not the Weaviate
	// client's: the client (v4.16.1) dials its own with TLS verification
	// off (InsecureSkipVerify) and never closes it.
	GRPC    string
	Timeout time.Duration // per request (default 30s)
}

// Store is the Weaviate chunk store.
type Store struct {
	c         *weaviate.Client
	conn      *grpc.ClientConn // the gRPC endpoint, when batch writes go over it
	timeout   time.Duration    // per request
	className string
	listMax   int // the most objects one listing Get asks for (maxList)

	mu      sync.Mutex
	class   bool                 // the class exists
	tenants map[string]bool      // tenants known to exist
	dims    map[string]int       // per client: vector length, once known
	df      map[string]wordCount // by client and word: DocFreqs' counts
	counts  map[string]keptCount // per client: its chunks, lately counted
	writes  map[string]uint64    // per client: this process's writes begun
}

// keptCount is a client's count of chunks and when it was read.
type keptCount struct {
	n  int
	at time.Time
}

// countTTL is how long roughCount keeps a count it read.
const countTTL = time.Second

// wordCount is a word's count of chunks and the client's chunks then.
type wordCount struct{ n, total int }

// dfCacheWords is how many counts the store keeps (then it starts over).
const dfCacheWords = 200_000

var (
	_ rag.Store = (*Store)(nil)
	// The optional interfaces search and bench ask for by assertion: a
	// signature that drifted would be passed over without a word.
	_ rag.TextGetter    = (*index)(nil)
	_ rag.SourceTexter  = (*index)(nil)
	_ rag.TermCounter   = (*index)(nil)
	_ rag.VectorSampler = (*index)(nil)
)

// Open connects (without waiting for the server; Ping does).
func Open(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("weaviate: url %q is not an http(s) URL", cfg.URL)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	class := cmp.Or(cfg.Class, DefaultClass)
	if !classPattern.MatchString(class) {
		return nil, fmt.Errorf("weaviate: class %q must match %s", class, classPattern)
	}
	wc := weaviate.Config{Host: u.Host, Scheme: u.Scheme, Timeout: timeout}
	s := &Store{className: class, timeout: timeout, listMax: maxList, tenants: map[string]bool{}, dims: map[string]int{}, df: map[string]wordCount{},
		counts: map[string]keptCount{}, writes: map[string]uint64{}}
	if cfg.GRPC != "" {
		if _, _, err := net.SplitHostPort(cfg.GRPC); err != nil {
			return nil, fmt.Errorf("weaviate: grpc %q is not host:port", cfg.GRPC)
		}
		creds := insecure.NewCredentials()
		if u.Scheme == "https" {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
		// Connected lazily, at the first batch or Ping.
		if s.conn, err = grpc.NewClient(cfg.GRPC, grpc.WithTransportCredentials(creds)); err != nil {
			return nil, fmt.Errorf("weaviate: grpc %s: %w", cfg.GRPC, err)
		}
	}
	if s.c, err = weaviate.NewClient(wc); err != nil {
		s.Close()
		return nil, fmt.Errorf("weaviate: %w", err)
	}
	return s, nil
}

// Ping implements rag.Store: the server is ready, and so is its gRPC
// endpoint when batch writes go over it.
func (s *Store) Ping(ctx context.Context) error {
	ready, err := s.c.Misc().ReadyChecker().Do(ctx)
	if err != nil {
		return fmt.Errorf("weaviate: %w", err)
	}
	if !ready {
		return errors.New("weaviate: not ready")
	}
	if s.conn != nil {
		res, err := grpc_health_v1.NewHealthClient(s.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("weaviate: grpc %s: %w", s.conn.Target(), err)
		}
		if res.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			return fmt.Errorf("weaviate: grpc %s: %s", s.conn.Target(), res.GetStatus())
		}
	}
	return nil
}

// Close implements rag.Store.
func (s *Store) Close() error {
	if s.conn != nil {
		return s.conn.Close()
	}
	return nil
}

var classPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]{0,127}$`)

// DeleteClass deletes the store's class and every client's chunks in it.
func (s *Store) DeleteClass(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.class, s.tenants, s.dims = false, map[string]bool{}, map[string]int{}
	clear(s.counts)
	for client := range s.writes {
		s.writes[client]++
	}
	return s.c.Schema().ClassDeleter().WithClassName(s.className).Do(ctx)
}

// For implements rag.Store.
func (s *Store) For(client string) rag.Index {
	x := &index{s: s, client: client}
	x.err = rag.ValidateClient(client)
	return x
}

type index struct {
	s      *Store
	client string
	err    error
}

// efConstruction is the breadth of the HNSW search that links a new vector
// into the graph (Weaviate's default 128). Inserting into the graph was a
// fifth to a third of Weaviate's CPU while it took the dev Jira corpus
// (BENCHMARKS.md, thirty-eighth round); at 64 it took
// it in 30.6 s instead of 34.6 (Weaviate's CPU 43 → 35 s, this 2-core
// machine), and the same eval's vector-only search was unchanged within
// Weaviate's run-to-run noise (recall@10 / MRR@10 0.655 / 0.401 → 0.662 /
// 0.391): a search's own breadth (ef) is up to 500 at our limits, which
// makes up for a sparser graph. Only a class created since takes it.
const efConstruction = 64

// textProps are the chunks' text properties and their indexes. Only the
// stems are searchable (BM25 reads searchProps and nothing else); the
// properties filters name are filterable — the text too, for its words'
// document frequencies (wordCounts). The title and the client's ID are
// only kept: each index is written for every chunk, and Weaviate's
// indexing is most of what an ingest into it costs.
var textProps = []struct {
	name, tokenization     string
	filterable, searchable bool
}{
	{"chunkId", "field", true, false}, {"text", "word", true, false}, {"sourceUrn", "field", true, false},
	{"sourceType", "field", true, false}, {"kind", "field", true, false}, {"nodeKey", "field", true, false},
	{"clientId", "field", false, false}, {"title", "word", false, false},
	{"stemmed", "word", false, true}, {"stemmedTitle", "word", false, true},
}

// searchProps are the properties BM25 reads: the stems of the item's
// title, weighing twice those of the text, as in the embedded backend.
const searchProps = `["stemmedTitle^2", "stemmed"]`

// Stems is text's words (rag.Words) as rag.Stem stems them, separated by
// spaces: what the stemmed properties hold and BM25 is asked.
func Stems(text string) string {
	words := rag.Words(text)
	for i, w := range words {
		words[i] = rag.Stem(w)
	}
	return strings.Join(words, " ")
}

// ensure creates the class and the client's tenant when missing.
func (x *index) ensure(ctx context.Context) error {
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.class {
		exists, err := s.c.Schema().ClassExistenceChecker().WithClassName(s.className).Do(ctx)
		if err != nil {
			return fmt.Errorf("weaviate: class: %w", err)
		}
		if exists {
			if err := x.addMissing(ctx); err != nil {
				return err
			}
		} else {
			t, f := true, false
			class := &models.Class{Class: x.s.className, Vectorizer: "none", MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true},
				InvertedIndexConfig: &models.InvertedIndexConfig{Bm25: &models.BM25Config{K1: 1.2, B: 0.75}, IndexTimestamps: false},
				VectorIndexConfig:   map[string]any{"efConstruction": efConstruction}}
			for _, p := range textProps {
				class.Properties = append(class.Properties, &models.Property{Name: p.name, DataType: []string{"text"}, Tokenization: p.tokenization,
					IndexFilterable: &p.filterable, IndexSearchable: &p.searchable})
			}
			for _, name := range []string{"graphRefs", "nodeTypes"} {
				class.Properties = append(class.Properties, &models.Property{Name: name, DataType: []string{"text[]"}, Tokenization: "field",
					IndexFilterable: &t, IndexSearchable: &f})
			}
			class.Properties = append(class.Properties, &models.Property{Name: "ts", DataType: []string{"date"}, IndexFilterable: &t})
			if err := s.c.Schema().ClassCreator().WithClass(class).Do(ctx); err != nil && !strings.Contains(err.Error(), "already exists") {
				return fmt.Errorf("weaviate: create class: %w", err)
			}
		}
		s.class = true
	}
	if !s.tenants[x.client] {
		exists, err := s.c.Schema().TenantsExists().WithClassName(s.className).WithTenant(x.client).Do(ctx)
		if err != nil {
			return fmt.Errorf("weaviate: tenant %s: %w", x.client, err)
		}
		if !exists {
			if err := s.c.Schema().TenantsCreator().WithClassName(s.className).WithTenants(models.Tenant{Name: x.client}).Do(ctx); err != nil &&
				!strings.Contains(err.Error(), "already exists") {
				return fmt.Errorf("weaviate: create tenant %s: %w", x.client, err)
			}
		}
		s.tenants[x.client] = true
	}
	return nil
}

// addMissing adds the text properties a class created by an earlier
// version lacks (title); its objects have them empty until written again.
func (x *index) addMissing(ctx context.Context) error {
	class, err := x.s.c.Schema().ClassGetter().WithClassName(x.s.className).Do(ctx)
	if err != nil {
		return fmt.Errorf("weaviate: class: %w", err)
	}
	for _, p := range textProps {
		if slices.ContainsFunc(class.Properties, func(have *models.Property) bool { return have.Name == p.name }) {
			continue
		}
		prop := &models.Property{Name: p.name, DataType: []string{"text"}, Tokenization: p.tokenization, IndexFilterable: &p.filterable, IndexSearchable: &p.searchable}
		if err := x.s.c.Schema().PropertyCreator().WithClassName(x.s.className).WithProperty(prop).Do(ctx); err != nil {
			return fmt.Errorf("weaviate: add property %s: %w", p.name, err)
		}
	}
	return nil
}

// exists reports whether the client has a tenant (reads of a client that
// never wrote find nothing, without creating anything).
func (x *index) exists(ctx context.Context) (bool, error) {
	x.s.mu.Lock()
	known := x.s.tenants[x.client]
	x.s.mu.Unlock()
	if known {
		return true, nil
	}
	ok, err := x.s.c.Schema().ClassExistenceChecker().WithClassName(x.s.className).Do(ctx)
	if err != nil || !ok {
		return false, wrap("class", err)
	}
	ok, err = x.s.c.Schema().TenantsExists().WithClassName(x.s.className).WithTenant(x.client).Do(ctx)
	if err != nil || !ok {
		return false, wrap("tenant", err)
	}
	x.s.mu.Lock()
	x.s.class, x.s.tenants[x.client] = true, true
	x.s.mu.Unlock()
	return true, nil
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("weaviate: %s: %w", what, err)
}

var idNamespace = uuid.MustParse("0c5a8a32-1bb4-5b8e-9f5e-6a0f1d7c9e21")

// objectID is a chunk's deterministic UUID.
func objectID(client, chunkID string) strfmt.UUID {
	return strfmt.UUID(uuid.NewSHA1(idNamespace, []byte(client+"\x00"+chunkID)).String())
}

// Upsert implements rag.Index.
func (x *index) Upsert(ctx context.Context, chunks ...rag.Chunk) error {
	if x.err != nil {
		return x.err
	}
	if len(chunks) == 0 {
		return nil
	}
	dim, err := rag.ValidateBatch(chunks)
	if err != nil {
		return err
	}
	x.forgetCount() // and once written: a count read meanwhile is not kept
	defer x.forgetCount()
	if err := x.ensure(ctx); err != nil {
		return err
	}
	if have, err := x.dimension(ctx); err != nil {
		return err
	} else if have > 0 && have != dim {
		return fmt.Errorf("%w: vector: %d dimensions, the index has %d", rag.ErrInvalid, dim, have)
	}
	if x.s.conn != nil {
		err = x.batchGRPC(ctx, chunks)
	} else {
		err = x.batchREST(ctx, chunks)
	}
	if err != nil {
		return err
	}
	x.remember(dim)
	return nil
}

// chunkProps are a chunk's properties but its array ones (graphRefs and
// nodeTypes, returned beside them).
func (x *index) chunkProps(c rag.Chunk) (props map[string]string, refs, types []string) {
	for _, r := range c.GraphRefs {
		if ns, _, ok := strings.Cut(r, ":"); ok && !slices.Contains(types, ns) {
			types = append(types, ns)
		}
	}
	return map[string]string{"chunkId": c.ID, "text": c.Text, "title": c.Title,
		"stemmed": Stems(c.Text), "stemmedTitle": Stems(c.Title), "sourceUrn": c.SourceURN, "sourceType": c.SourceType, "kind": c.Kind,
		"nodeKey": c.NodeKey, "clientId": x.client, "ts": c.Timestamp.UTC().Format(time.RFC3339Nano)}, nonNil(c.GraphRefs), nonNil(types)
}

// batchREST writes chunks through the client's REST batch.
func (x *index) batchREST(ctx context.Context, chunks []rag.Chunk) error {
	objs := make([]*models.Object, len(chunks))
	for i, c := range chunks {
		props, refs, types := x.chunkProps(c)
		m := make(map[string]any, len(props)+2)
		for k, v := range props {
			m[k] = v
		}
		m["graphRefs"], m["nodeTypes"] = refs, types
		objs[i] = &models.Object{Class: x.s.className, Tenant: x.client, ID: objectID(x.client, c.ID), Vector: rag.Normalize(c.Vector), Properties: m}
	}
	res, err := x.s.c.Batch().ObjectsBatcher().WithObjects(objs...).Do(ctx)
	if err != nil {
		return fmt.Errorf("weaviate: batch upsert: %w", err)
	}
	for _, r := range res {
		if r.Result != nil && r.Result.Errors != nil && len(r.Result.Errors.Error) > 0 {
			return fmt.Errorf("weaviate: upsert %s: %s", r.ID, r.Result.Errors.Error[0].Message)
		}
	}
	return nil
}

// batchGRPC writes chunks through Weaviate's gRPC batch service on the
// store's connection.
func (x *index) batchGRPC(ctx context.Context, chunks []rag.Chunk) error {
	objs := make([]*pb.BatchObject, len(chunks))
	for i, c := range chunks {
		props, refs, types := x.chunkProps(c)
		fields := make(map[string]*structpb.Value, len(props))
		for k, v := range props {
			fields[k] = structpb.NewStringValue(v)
		}
		objs[i] = &pb.BatchObject{Uuid: objectID(x.client, c.ID).String(), Collection: x.s.className, Tenant: x.client,
			VectorBytes: vectorBytes(rag.Normalize(c.Vector)),
			Properties: &pb.BatchObject_Properties{NonRefProperties: &structpb.Struct{Fields: fields},
				TextArrayProperties: []*pb.TextArrayProperties{{PropName: "graphRefs", Values: refs}, {PropName: "nodeTypes", Values: types}}}}
	}
	ctx, cancel := context.WithTimeout(ctx, x.s.timeout)
	defer cancel()
	res, err := pb.NewWeaviateClient(x.s.conn).BatchObjects(ctx, &pb.BatchObjectsRequest{Objects: objs})
	if err != nil {
		return fmt.Errorf("weaviate: batch upsert: grpc %s: %w", x.s.conn.Target(), err)
	}
	if errs := res.GetErrors(); len(errs) > 0 {
		i := int(errs[0].GetIndex())
		if i < 0 || i >= len(chunks) {
			return fmt.Errorf("weaviate: batch upsert: %s", errs[0].GetError())
		}
		return fmt.Errorf("weaviate: upsert %s: %s", objs[i].Uuid, errs[0].GetError())
	}
	return nil
}

// vectorBytes is v as Weaviate's gRPC vector_bytes: little-endian float32s.
func vectorBytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// dimension returns the vector length of the client's chunks (0: none
// yet), read from one chunk once and then remembered until Drop.
func (x *index) dimension(ctx context.Context) (int, error) {
	x.s.mu.Lock()
	dim := x.s.dims[x.client]
	x.s.mu.Unlock()
	if dim > 0 {
		return dim, nil
	}
	rows, err := x.get(ctx, "limit: 1", "chunkId", true)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	x.remember(len(rows[0].chunk.Vector))
	return len(rows[0].chunk.Vector), nil
}

func (x *index) remember(dim int) {
	x.s.mu.Lock()
	x.s.dims[x.client] = dim
	x.s.mu.Unlock()
}

// row is one object of a Get query.
type row struct {
	chunk           rag.Chunk
	score, distance float64
}

const fields = `chunkId text title sourceUrn sourceType kind nodeKey graphRefs ts`

// fieldsNoText are a search's fields when its hits may come without their
// texts (rag.Query.NoText: a pool of 200 passages whose few kept have their
// texts read after): Weaviate then neither decodes nor sends the texts.
const fieldsNoText = `chunkId title sourceUrn sourceType kind nodeKey graphRefs ts`

// searchFields are the fields a search q asks for.
func searchFields(q rag.Query) string {
	if q.NoText {
		return fieldsNoText
	}
	return fields
}

// get runs a Get on the client's tenant with args (GraphQL, already
// escaped) and returns its rows, with the properties props (a fields
// list) and with their vectors or not.
func (x *index) get(ctx context.Context, args, props string, withVector bool) ([]row, error) {
	if ok, err := x.exists(ctx); err != nil || !ok {
		return nil, err // a client that never wrote has nothing
	}
	extra := "score distance"
	if withVector {
		extra += " vector"
	}
	list, err := x.getObjects(ctx, "query", fmt.Sprintf(`%s(tenant: %s, %s){%s _additional{%s}}`, x.s.className, quote(x.client), args, props, extra))
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(list))
	for _, item := range list {
		m, _ := item.(map[string]any)
		var r row
		c := &r.chunk
		c.ID, _ = m["chunkId"].(string)
		c.Text, _ = m["text"].(string)
		c.Title, _ = m["title"].(string)
		c.SourceURN, _ = m["sourceUrn"].(string)
		c.SourceType, _ = m["sourceType"].(string)
		c.Kind, _ = m["kind"].(string)
		c.NodeKey, _ = m["nodeKey"].(string)
		c.GraphRefs = []string{}
		if refs, ok := m["graphRefs"].([]any); ok {
			for _, ref := range refs {
				if s, ok := ref.(string); ok {
					c.GraphRefs = append(c.GraphRefs, s)
				}
			}
		}
		if ts, ok := m["ts"].(string); ok {
			c.Timestamp, _ = time.Parse(time.RFC3339Nano, ts)
			c.Timestamp = c.Timestamp.UTC()
		}
		add, _ := m["_additional"].(map[string]any)
		if s, ok := add["score"].(string); ok && s != "" {
			r.score, _ = strconv.ParseFloat(s, 64)
		}
		if d, ok := add["distance"].(float64); ok {
			r.distance = d
		}
		c.Vector = vectorOf(add)
		out = append(out, r)
	}
	return out, nil
}

// getObjects runs a GraphQL Get of get (the class, its arguments and
// fields) and returns the class's objects; what names it in errors.
func (x *index) getObjects(ctx context.Context, what, get string) ([]any, error) {
	resp, err := x.s.c.GraphQL().Raw().WithQuery("{Get{" + get + "}}").Do(ctx)
	if err != nil {
		return nil, fmt.Errorf("weaviate: %s: %w", what, err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("weaviate: %s: %s", what, resp.Errors[0].Message)
	}
	data, _ := resp.Data["Get"].(map[string]any)
	list, _ := data[x.s.className].([]any)
	return list, nil
}

// vectorOf reads an object's vector from its _additional fields (nil when
// it has none).
func vectorOf(add map[string]any) []float32 {
	raw, _ := add["vector"].([]any)
	var vec []float32
	for _, f := range raw {
		if v, ok := f.(float64); ok {
			vec = append(vec, float32(v))
		}
	}
	return vec
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// where renders a filter (nil when it filters nothing).
func where(f rag.Filter) *filters.WhereBuilder {
	var ops []*filters.WhereBuilder
	text := func(path string, vals []string) {
		if len(vals) > 0 {
			ops = append(ops, filters.Where().WithPath([]string{path}).WithOperator(filters.ContainsAny).WithValueText(vals...))
		}
	}
	text("sourceType", f.SourceTypes)
	text("kind", f.Kinds)
	text("nodeTypes", f.NodeTypes)
	if f.SourceURN != "" {
		ops = append(ops, filters.Where().WithPath([]string{"sourceUrn"}).WithOperator(filters.Equal).WithValueText(f.SourceURN))
	}
	if !f.Since.IsZero() {
		ops = append(ops, filters.Where().WithPath([]string{"ts"}).WithOperator(filters.GreaterThanEqual).WithValueDate(f.Since))
	}
	if !f.Until.IsZero() {
		ops = append(ops, filters.Where().WithPath([]string{"ts"}).WithOperator(filters.LessThan).WithValueDate(f.Until))
	}
	switch len(ops) {
	case 0:
		return nil
	case 1:
		return ops[0]
	}
	return filters.Where().WithOperator(filters.And).WithOperands(ops)
}

func whereArg(w *filters.WhereBuilder) string {
	if w == nil {
		return ""
	}
	return ", " + w.String()
}

// byChunkIDs filters the chunks whose IDs are ids.
func byChunkIDs(ids []string) *filters.WhereBuilder {
	return filters.Where().WithPath([]string{"chunkId"}).WithOperator(filters.ContainsAny).WithValueText(ids...)
}

// Get implements rag.Index.
func (x *index) Get(ctx context.Context, ids ...string) ([]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := x.get(ctx, fmt.Sprintf("limit: %d, %s", len(ids), byChunkIDs(ids).String()), fields, true)
	if err != nil {
		return nil, err
	}
	by := map[string]rag.Chunk{}
	for _, r := range rows {
		by[r.chunk.ID] = r.chunk
	}
	var out []rag.Chunk
	for _, id := range ids {
		if c, ok := by[id]; ok {
			out = append(out, c)
			delete(by, id)
		}
	}
	return out, nil
}

// maxList bounds how many objects a listing Get reads (Weaviate's own
// bound, QUERY_MAXIMUM_RESULTS, is 10,000 by default).
const maxList = 10000

// Texts implements rag.TextGetter: the chunks' IDs, texts and titles alone
// (Get would read their vectors and metadata too).
func (x *index) Texts(ctx context.Context, ids ...string) (map[string]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	out := make(map[string]rag.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := x.get(ctx, fmt.Sprintf("limit: %d, %s", len(ids), byChunkIDs(ids).String()), "chunkId text title", false)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.chunk.ID] = rag.Chunk{ID: r.chunk.ID, Text: r.chunk.Text, Title: r.chunk.Title}
	}
	return out, nil
}

// SourceTexts implements rag.SourceTexter: one Get of the source's chunks'
// IDs, texts, titles and kinds (SourceChunkIDs and Get would be two, Get's
// with the vectors), up to the listing bound.
func (x *index) SourceTexts(ctx context.Context, sourceURN string) ([]rag.Chunk, error) {
	if x.err != nil {
		return nil, x.err
	}
	w := where(rag.Filter{SourceURN: sourceURN})
	rows, err := x.get(ctx, fmt.Sprintf("limit: %d, %s", x.s.listMax, w.String()), "chunkId text title kind sourceUrn", false)
	if err != nil {
		return nil, err
	}
	out := make([]rag.Chunk, len(rows))
	for i, r := range rows {
		out[i] = r.chunk
		out[i].GraphRefs = nil
	}
	slices.SortFunc(out, func(a, b rag.Chunk) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// SourceChunkIDs implements rag.Index.
func (x *index) SourceChunkIDs(ctx context.Context, sourceURN string) ([]string, error) {
	m, err := x.SourcesChunkIDs(ctx, []string{sourceURN})
	return m[sourceURN], err
}

// sourcesPerGet bounds how many sources one Get of SourcesChunkIDs names.
const sourcesPerGet = 200

// SourcesChunkIDs implements rag.Index: a Get of only the chunks' IDs and
// sources for up to sourcesPerGet sources at once.
func (x *index) SourcesChunkIDs(ctx context.Context, sourceURNs []string) (map[string][]string, error) {
	if x.err != nil {
		return nil, x.err
	}
	out := map[string][]string{}
	if ok, err := x.exists(ctx); err != nil || !ok {
		return out, err // a client that never wrote has nothing
	}
	urns := slices.Compact(slices.Sorted(slices.Values(sourceURNs)))
	for len(urns) > 0 {
		n := min(len(urns), sourcesPerGet)
		if err := x.sourcesChunkIDs(ctx, urns[:n], out); err != nil {
			return nil, err
		}
		urns = urns[n:]
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out, nil
}

// sourcesChunkIDs adds the chunk IDs of urns to out. A Get answers at most
// listMax objects: one that may have stopped there is asked again in
// halves, and a single source is listed up to listMax.
func (x *index) sourcesChunkIDs(ctx context.Context, urns []string, out map[string][]string) error {
	op := filters.ContainsAny
	if len(urns) == 1 {
		op = filters.Equal
	}
	w := filters.Where().WithPath([]string{"sourceUrn"}).WithOperator(op).WithValueText(urns...)
	list, err := x.getObjects(ctx, "source chunks", fmt.Sprintf(`%s(tenant: %s, limit: %d, %s){chunkId sourceUrn}`, x.s.className, quote(x.client), x.s.listMax, w.String()))
	if err != nil {
		return err
	}
	if len(list) >= x.s.listMax && len(urns) > 1 {
		half := len(urns) / 2
		if err := x.sourcesChunkIDs(ctx, urns[:half], out); err != nil {
			return err
		}
		return x.sourcesChunkIDs(ctx, urns[half:], out)
	}
	for _, item := range list {
		m, _ := item.(map[string]any)
		id, _ := m["chunkId"].(string)
		urn, _ := m["sourceUrn"].(string)
		out[urn] = append(out[urn], id)
	}
	return nil
}

func (x *index) deleteWhere(ctx context.Context, w *filters.WhereBuilder) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	if ok, err := x.exists(ctx); err != nil || !ok {
		return 0, err
	}
	x.forgetCount()
	defer x.forgetCount()
	res, err := x.s.c.Batch().ObjectsBatchDeleter().WithClassName(x.s.className).WithTenant(x.client).WithOutput("minimal").WithWhere(w).Do(ctx)
	if err != nil {
		return 0, fmt.Errorf("weaviate: delete: %w", err)
	}
	if res.Results == nil {
		return 0, nil
	}
	return int(res.Results.Successful), nil
}

// Delete implements rag.Index.
func (x *index) Delete(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, x.err
	}
	return x.deleteWhere(ctx, byChunkIDs(ids))
}

// DeleteBySource implements rag.Index.
func (x *index) DeleteBySource(ctx context.Context, sourceURN string) (int, error) {
	return x.deleteWhere(ctx, where(rag.Filter{SourceURN: sourceURN}))
}

// DeleteByNode implements rag.Index.
func (x *index) DeleteByNode(ctx context.Context, nodeKey string) (int, error) {
	return x.deleteWhere(ctx, filters.Where().WithPath([]string{"nodeKey"}).WithOperator(filters.Equal).WithValueText(nodeKey))
}

// Drop implements rag.Index: the client's tenant goes.
func (x *index) Drop(ctx context.Context) error {
	if x.err != nil {
		return x.err
	}
	if ok, err := x.exists(ctx); err != nil || !ok {
		return err
	}
	if err := x.s.c.Schema().TenantsDeleter().WithClassName(x.s.className).WithTenants(x.client).Do(ctx); err != nil {
		return fmt.Errorf("weaviate: drop tenant %s: %w", x.client, err)
	}
	x.forgetCount()
	x.s.mu.Lock()
	delete(x.s.tenants, x.client)
	delete(x.s.dims, x.client)
	x.s.mu.Unlock()
	return nil
}

// Count implements rag.Index.
func (x *index) Count(ctx context.Context) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	if ok, err := x.exists(ctx); err != nil || !ok {
		return 0, err
	}
	q := fmt.Sprintf(`{Aggregate{%s(tenant: %s){meta{count}}}}`, x.s.className, quote(x.client))
	resp, err := x.s.c.GraphQL().Raw().WithQuery(q).Do(ctx)
	if err != nil {
		return 0, fmt.Errorf("weaviate: count: %w", err)
	}
	if len(resp.Errors) > 0 {
		return 0, fmt.Errorf("weaviate: count: %s", resp.Errors[0].Message)
	}
	agg, _ := resp.Data["Aggregate"].(map[string]any)
	return metaCount(agg, x.s.className), nil
}

// roughCount is the client's chunks as Count read them at most countTTL
// ago and not before or during a write of this process to them: enough for the
// checks of a tenth's drift (VectorCount, DocFreqs' kept counts), which
// made two Aggregate requests of every search.
func (x *index) roughCount(ctx context.Context) (int, error) {
	x.s.mu.Lock()
	c, ok := x.s.counts[x.client]
	writes := x.s.writes[x.client]
	x.s.mu.Unlock()
	if ok && time.Since(c.at) < countTTL {
		return c.n, nil
	}
	at := time.Now()
	n, err := x.Count(ctx)
	if err != nil {
		return 0, err
	}
	x.s.mu.Lock()
	if x.s.writes[x.client] == writes { // no write began while it counted
		x.s.counts[x.client] = keptCount{n, at}
	}
	x.s.mu.Unlock()
	return n, nil
}

// forgetCount drops the client's kept count: a write begins.
func (x *index) forgetCount() {
	x.s.mu.Lock()
	delete(x.s.counts, x.client)
	x.s.writes[x.client]++
	x.s.mu.Unlock()
}

// metaCount reads the meta count an Aggregate answered under key (a class
// or an alias); 0 when there is none.
func metaCount(agg map[string]any, key string) int {
	list, _ := agg[key].([]any)
	if len(list) == 0 {
		return 0
	}
	meta, _ := list[0].(map[string]any)["meta"].(map[string]any)
	n, _ := meta["count"].(float64)
	return int(n)
}

// docFreqBatch is how many words one DocFreqs request counts.
const docFreqBatch = 100

// DocFreqs implements rag.TermCounter: Weaviate counts the client's chunks
// whose text holds each word (an aggregate per word, under an alias, many
// in one request). It counts the word as written, not its stem (the
// stemmed properties are searchable only, not filterable): "crashes" and
// "crash" are counted apart, a fair measure of a word's rarity all the
// same. A word Weaviate takes for a stop word counts as in every chunk.
// Counting costs Weaviate milliseconds a word, so counts are kept until
// the client's chunks grow or shrink by a tenth.
func (x *index) DocFreqs(ctx context.Context, words []string) ([]int, int, error) {
	if x.err != nil {
		return nil, 0, x.err
	}
	counts := make([]int, len(words))
	if ok, err := x.exists(ctx); err != nil || !ok {
		return counts, 0, err
	}
	total, err := x.roughCount(ctx)
	if err != nil {
		return nil, 0, err
	}
	var missing []int
	x.s.mu.Lock()
	for i, w := range words {
		c, ok := x.s.df[x.client+"\x00"+w]
		if ok && math.Abs(float64(total-c.total)) <= 0.1*float64(c.total) {
			counts[i] = c.n
		} else {
			missing = append(missing, i)
		}
	}
	x.s.mu.Unlock()
	for start := 0; start < len(missing); start += docFreqBatch {
		idx := missing[start:min(start+docFreqBatch, len(missing))]
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = words[i]
		}
		n, err := x.wordCounts(ctx, batch)
		if errors.Is(err, errStopWords) {
			// One of them is a stop word to Weaviate: count them one by one.
			n = make([]int, len(batch))
			for j, w := range batch {
				one, err := x.wordCounts(ctx, []string{w})
				switch {
				case errors.Is(err, errStopWords):
					n[j] = total
				case err != nil:
					return nil, 0, err
				default:
					n[j] = one[0]
				}
			}
		} else if err != nil {
			return nil, 0, err
		}
		x.s.mu.Lock()
		if len(x.s.df)+len(batch) > dfCacheWords {
			clear(x.s.df)
		}
		for j, i := range idx {
			counts[i] = n[j]
			x.s.df[x.client+"\x00"+words[i]] = wordCount{n[j], total}
		}
		x.s.mu.Unlock()
	}
	return counts, total, nil
}

// errStopWords is Weaviate's answer to a filter on nothing but stop words.
var errStopWords = errors.New("weaviate: only stop words")

// wordCounts counts the client's chunks whose text holds each word, in one
// request.
func (x *index) wordCounts(ctx context.Context, words []string) ([]int, error) {
	var q strings.Builder
	q.WriteString("{Aggregate{")
	for i, w := range words {
		fmt.Fprintf(&q, "w%d: %s(tenant: %s, where: {path: [\"text\"], operator: Equal, valueText: %s}){meta{count}} ",
			i, x.s.className, quote(x.client), quote(w))
	}
	q.WriteString("}}")
	resp, err := x.s.c.GraphQL().Raw().WithQuery(q.String()).Do(ctx)
	if err != nil {
		return nil, fmt.Errorf("weaviate: document frequencies: %w", err)
	}
	if len(resp.Errors) > 0 {
		if strings.Contains(resp.Errors[0].Message, "only stopwords") {
			return nil, errStopWords
		}
		return nil, fmt.Errorf("weaviate: document frequencies: %s", resp.Errors[0].Message)
	}
	agg, _ := resp.Data["Aggregate"].(map[string]any)
	counts := make([]int, len(words))
	for i := range words {
		counts[i] = metaCount(agg, fmt.Sprintf("w%d", i))
	}
	return counts, nil
}

func vectorJSON(v []float32) string {
	b, _ := json.Marshal(rag.Normalize(v))
	return string(b)
}

// BM25 implements rag.Index.
func (x *index) BM25(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q.Text) == "" {
		return nil, nil
	}
	rows, err := x.get(ctx, fmt.Sprintf(`bm25: {query: %s, properties: %s}, limit: %d%s`, quote(Stems(q.Text)), searchProps, q.Limit, whereArg(where(q.Filter))), searchFields(q), false)
	if err != nil {
		return nil, err
	}
	hits := make([]rag.Hit, 0, len(rows))
	for _, r := range rows {
		if r.score <= 0 {
			continue
		}
		hits = append(hits, rag.Hit{Chunk: r.chunk, Score: r.score, BM25Score: r.score})
	}
	return hits, nil
}

// NearVector implements rag.Index.
func (x *index) NearVector(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	if len(q.Vector) == 0 {
		return nil, nil
	}
	if have, err := x.dimension(ctx); err != nil {
		return nil, err
	} else if have > 0 && have != len(q.Vector) {
		return nil, fmt.Errorf("%w: vector: %d dimensions, the index has %d", rag.ErrInvalid, len(q.Vector), have)
	}
	rows, err := x.get(ctx, fmt.Sprintf(`nearVector: {vector: %s}, limit: %d%s`, vectorJSON(q.Vector), q.Limit, whereArg(where(q.Filter))), searchFields(q), false)
	if err != nil {
		return nil, err
	}
	hits := make([]rag.Hit, len(rows))
	for i, r := range rows {
		s := 1 - r.distance // cosine distance → similarity
		hits[i] = rag.Hit{Chunk: r.chunk, Score: s, VectorScore: s}
	}
	return hits, nil
}

// Hybrid implements rag.Index with Weaviate's own fusion.
func (x *index) Hybrid(ctx context.Context, q rag.Query) ([]rag.Hit, error) {
	if x.err != nil {
		return nil, x.err
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	fusion := "relativeScoreFusion"
	if q.Fusion == rag.Ranked {
		fusion = "rankedFusion"
	}
	arg := fmt.Sprintf(`hybrid: {query: %s, alpha: %v, fusionType: %s, properties: %s`, quote(Stems(q.Text)), q.Alpha, fusion, searchProps)
	if len(q.Vector) > 0 {
		arg += ", vector: " + vectorJSON(q.Vector)
	}
	rows, err := x.get(ctx, fmt.Sprintf(`%s}, limit: %d%s`, arg, q.Limit, whereArg(where(q.Filter))), searchFields(q), false)
	if err != nil {
		return nil, err
	}
	hits := make([]rag.Hit, len(rows))
	for i, r := range rows {
		hits[i] = rag.Hit{Chunk: r.chunk, Score: r.score}
	}
	return hits, nil
}

// VectorCount implements rag.VectorSampler: the client's chunks, counted
// at most a second ago (roughCount).
func (x *index) VectorCount(ctx context.Context) (int, error) { return x.roughCount(ctx) }

// SampleVectors implements rag.VectorSampler: the first n of the client's
// objects in the order of their IDs (Weaviate's cursor), which are hashes
// of the chunk IDs (objectID), so a spread of the whole.
func (x *index) SampleVectors(ctx context.Context, n int) ([][]float32, error) {
	if x.err != nil {
		return nil, x.err
	}
	if ok, err := x.exists(ctx); err != nil || !ok || n <= 0 {
		return nil, err
	}
	list, err := x.getObjects(ctx, "sample vectors", fmt.Sprintf(`%s(tenant: %s, limit: %d, after: "00000000-0000-0000-0000-000000000000"){_additional{vector}}`,
		x.s.className, quote(x.client), n))
	if err != nil {
		return nil, err
	}
	out := make([][]float32, 0, len(list))
	for _, item := range list {
		m, _ := item.(map[string]any)
		add, _ := m["_additional"].(map[string]any)
		if vec := vectorOf(add); len(vec) > 0 {
			out = append(out, vec)
		}
	}
	return out, nil
}
