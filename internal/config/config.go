// Package config loads Jervis's configuration: defaults, then one YAML file,
// then JERVIS_* environment variables; cmd/jervis applies flags last and
// calls Validate. Unknown keys, unknown JERVIS_* variables and values of the
// wrong type are errors that name the key.
//
// Every key of the file has an environment variable: JERVIS_ followed by its
// path in upper case with '.' as '_', e.g. log.level → JERVIS_LOG_LEVEL and
// store.sqlite.busy_timeout → JERVIS_STORE_SQLITE_BUSY_TIMEOUT. Lists are
// comma-separated there (JERVIS_ROLES=api,indexers).
package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

var (
	clientID   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// Roles are the parts of the pipeline one process can run.
var Roles = []string{"pollers", "indexers", "qualifier", "executor", "api"}

// Config is the whole configuration.
type Config struct {
	// DataDir holds the embedded stores.
	DataDir string `yaml:"data_dir"`
	// Listen is the HTTP address of the API, health and metrics.
	Listen string `yaml:"listen"`
	// Roles this process runs; all by default.
	Roles []string `yaml:"roles"`
	// ShutdownTimeout is how long in-flight work may finish after SIGINT or
	// SIGTERM before it is cancelled and handed back.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MemoryLimit is a soft limit on the process's memory ("1GiB",
	// "800MiB"; "" or "0": none, or GOMEMLIMIT when set): past it the Go
	// collector runs more often instead of letting the heap grow to twice
	// what is live (runtime/debug.SetMemoryLimit).
	MemoryLimit string `yaml:"memory_limit"`
	// GCPercent is how far, in percent of what is live, the Go heap grows
	// before the collector runs — by at least gctune.MinHeadroom (128 MiB),
	// set again after each collection (internal/gctune; GOGC, when set,
	// wins). 50 by default, not Go's 100: the heap is mostly the search
	// index's pointer-free arrays, cheap to collect, and at 100,000
	// documents 100 let the process grow to about 2.2 times what was live;
	// the floor keeps a small heap from collecting every few megabytes
	// (BENCHMARKS.md).
	GCPercent int       `yaml:"gc_percent"`
	Log       Log       `yaml:"log"`
	Store     Store     `yaml:"store"`
	Graph     Graph     `yaml:"graph"`
	RAG       RAG       `yaml:"rag"`
	Embedder  Embedder  `yaml:"embedder"`
	Indexers  Indexers  `yaml:"indexers"`
	Qualifier Qualifier `yaml:"qualifier"`
	Executor  Executor  `yaml:"executor"`
	API       API       `yaml:"api"`
	// Connections are the sources the pollers watch (file only: no
	// environment overrides).
	Connections []Connection `yaml:"connections"`
}

// Qualifier tunes the qualifier.
type Qualifier struct {
	// Concurrency is how many tasks are qualified at once — with Batch
	// above 1, how many batches.
	Concurrency int `yaml:"concurrency"`
	// Batch is how many tasks the rules qualifier takes together: their
	// documents ingested with one write per store, their TaskMemory in one
	// (1: each task alone). With a model the agent takes one task at a
	// time whatever it says.
	Batch int `yaml:"batch"`
	// Users are the people whose requests make a document READY_FOR_GPU
	// (e-mail addresses); empty: a request to anyone does.
	Users []string `yaml:"users"`
	// Model is the Ollama model of the agent qualifier; empty: rules only.
	Model string `yaml:"model"`
	// OllamaHost is the Ollama server of the agent.
	OllamaHost string `yaml:"ollama_host"`
	// MaxIterations caps model calls per task.
	MaxIterations int `yaml:"max_iterations"`
	// UncertainLinks is what happens to links no pattern classifies: auto
	// (default: model when a model is configured, else record), record
	// (not fetched), fetch (through the guarded client), or model (the
	// model decides; needs qualifier.model).
	UncertainLinks string `yaml:"uncertain_links"`
	// PossibleDuplicates, when above 0, is the similarity (kb.Similar,
	// 0..1) from which an item of a kind whose items can duplicate each
	// other (Jira issues) gets a possible_duplicate edge to a like item of
	// its source type. 0 (default): none are recorded.
	PossibleDuplicates float64 `yaml:"possible_duplicates"`
}

// Executor tunes the executor (role executor): READY_FOR_GPU work that
// runs only while no user request is active.
type Executor struct {
	// IdleAfter is how long no user request must have been active before
	// background work runs.
	IdleAfter time.Duration `yaml:"idle_after"`
	// Concurrency is how many tasks run at once (1: one GPU).
	Concurrency int `yaml:"concurrency"`
	// Model is the primary (GPU) Ollama model of the workflow agent; empty:
	// the extractive workflow (a digest from TaskMemory and the graph).
	Model string `yaml:"model"`
	// OllamaHost is the Ollama server of the workflow agent.
	OllamaHost string `yaml:"ollama_host"`
	// MaxIterations, MaxTokens and MaxDuration are a task's budget.
	MaxIterations int           `yaml:"max_iterations"`
	MaxTokens     int           `yaml:"max_tokens"`
	MaxDuration   time.Duration `yaml:"max_duration"`
}

// API tunes the REST API (role api). Its admin key is never a setting:
// JERVIS_ADMIN_KEY sets it, or one is generated at first start.
type API struct {
	// CORSOrigins may call the API from a browser ("*": any).
	CORSOrigins []string `yaml:"cors_origins"`
	// RateLimit is requests per second per API key on average; RateBurst
	// at once.
	RateLimit float64 `yaml:"rate_limit"`
	RateBurst int     `yaml:"rate_burst"`
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int `yaml:"max_body_bytes"`
}

// SecretEnvVars are JERVIS_* variables that carry secrets rather than
// settings: read where they are used, never stored in Config (so never
// printed with it).
var SecretEnvVars = []string{"JERVIS_ADMIN_KEY", "JERVIS_API_KEY", "JERVIS_GRAPH_ARANGO_PASSWORD"}

// Indexers tunes the continuous indexers.
type Indexers struct {
	// Concurrency is how many documents are indexed at once.
	Concurrency int `yaml:"concurrency"`
	// BatchSize is how many documents one claim takes.
	BatchSize int `yaml:"batch_size"`
	// PollInterval is how often an idle indexer looks for documents another
	// process stored (this process's pollers wake it at once).
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Store selects and configures the pipeline-state backend.
type Store struct {
	Backend string `yaml:"backend"` // sqlite or mongo
	SQLite  SQLite `yaml:"sqlite"`
	Mongo   Mongo  `yaml:"mongo"`
}

// Mongo locates the MongoDB server of store.backend mongo.
type Mongo struct {
	// URI is the connection string; put one with a password in
	// JERVIS_STORE_MONGO_URI, not in the file.
	URI string `yaml:"uri"`
	// Database defaults to the URI's path, else "jervis".
	Database string `yaml:"database"`
	// Timeout bounds connecting and each operation.
	Timeout time.Duration `yaml:"timeout"`
}

// Graph selects the graph backend.
type Graph struct {
	Backend string `yaml:"backend"` // sqlite (graph.db in the data directory) or arango
	Arango  Arango `yaml:"arango"`
}

// Arango locates the ArangoDB server of graph.backend arango. Its password
// is read from JERVIS_GRAPH_ARANGO_PASSWORD only.
type Arango struct {
	URL      string        `yaml:"url"`      // e.g. http://arangodb:8529
	Database string        `yaml:"database"` // created when missing
	User     string        `yaml:"user"`
	Timeout  time.Duration `yaml:"timeout"`
}

// RAG selects the chunk backend (BM25, vectors, hybrid search).
type RAG struct {
	Backend  string    `yaml:"backend"` // sqlite (chunks.db in the data directory) or weaviate
	SQLite   RAGSQLite `yaml:"sqlite"`
	Weaviate Weaviate  `yaml:"weaviate"`
}

// DefaultVectorLists is rag.sqlite.vector_lists unless set: from 100,000
// chunks a client's vectors are in lists. Since their trainings run aside
// (beside writes and searches, not under the index's write lock), at
// 583,209 chunks (jervis bench --synthetic 100000, medians of three) they
// cost the import nothing measurable — 225 against 228 documents/s,
// freshness p99 252 against 292 ms — and took one client's search from
// 15.0 / 39.7 to 8.3 / 16.6 ms (p50 / p99) and 16 clients from 91 to 154
// searches/s, finding 0.885 of an exact scan's best 80 vectors
// (BENCHMARKS.md, twentieth round). Under it (the dev corpora's 41,000
// chunks) every search is exact, as before.
const DefaultVectorLists = 100_000

// RAGSQLite tunes the embedded chunk store (rag.backend sqlite).
type RAGSQLite struct {
	// VectorLists is how many chunks a client needs before its vectors are
	// kept in lists (an inverted file: a search scans the lists nearest
	// the query, about a tenth of the rows, instead of every row —
	// approximate, faster); 100,000 by default (DefaultVectorLists); 0:
	// never, every search exact.
	VectorLists int `yaml:"vector_lists"`
}

// Embedder selects how chunks and queries become vectors. Changing it on a
// knowledge base with chunks needs a reprocess with a wipe: vectors of two
// models do not compare.
type Embedder struct {
	Backend string         `yaml:"backend"` // glove (compiled in) or ollama
	Ollama  OllamaEmbedder `yaml:"ollama"`
	// ClientEncoder says when each client's own encoder (kb/embed/corpus)
	// is trained without an operator asking.
	ClientEncoder ClientEncoder `yaml:"client_encoder"`
}

// ClientEncoder is the encoder schedule of the processes that run the api
// role (api.Server.RunEncoderSchedule): once a client's queues are empty,
// it trains the client's own encoder and replays the client's documents
// with it when the client has MinDocuments documents and no encoder, and
// again when its documents have grown Growth times since the last.
type ClientEncoder struct {
	// MinDocuments a client needs (every version, in every state) before
	// its first encoder is trained by itself; 0: only when asked (POST
	// /admin/v1/clients/{client}/encoder, jervis encoder). 1,000 by
	// default: on fewer, the words of a client's titles and bodies are too
	// few to learn from.
	MinDocuments int `yaml:"min_documents"`
	// Growth retrains a client's encoder once it has this many times the
	// documents it had when it was last trained; 0: never again by itself.
	// 2 by default: each retraining replays the client's documents, and
	// doubling keeps what all the replays cost under twice one of the
	// largest.
	Growth float64 `yaml:"growth"`
	// Every is how often the schedule looks at the clients (30s).
	Every time.Duration `yaml:"every"`
}

// OllamaEmbedder is the Ollama server and model of embedder.backend ollama.
type OllamaEmbedder struct {
	Host    string        `yaml:"host"`
	Model   string        `yaml:"model"`
	Timeout time.Duration `yaml:"timeout"`
}

// Weaviate locates the Weaviate server of rag.backend weaviate.
type Weaviate struct {
	URL   string `yaml:"url"`   // e.g. http://weaviate:8080
	Class string `yaml:"class"` // the class holding every client's chunks
	// GRPC is the server's gRPC address (host:port, e.g. weaviate:50051),
	// over which batch writes go; empty, they go over REST.
	GRPC    string        `yaml:"grpc"`
	Timeout time.Duration `yaml:"timeout"`
}

// SQLite configures the embedded store.
type SQLite struct {
	// Path of the database file; default <data_dir>/jervis.db.
	Path string `yaml:"path"`
	// BusyTimeout is how long a write waits for another process's lock.
	BusyTimeout time.Duration `yaml:"busy_timeout"`
}

// DefaultGCPercent is gc_percent's default (Config.GCPercent).
const DefaultGCPercent = 50

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		DataDir:         "./data",
		Listen:          "127.0.0.1:8080",
		Roles:           slices.Clone(Roles),
		ShutdownTimeout: 10 * time.Second,
		GCPercent:       DefaultGCPercent,
		Log:             Log{Level: "info", Format: "text"},
		Store:           Store{Backend: "sqlite", SQLite: SQLite{BusyTimeout: 5 * time.Second}, Mongo: Mongo{Timeout: 30 * time.Second}},
		Graph:           Graph{Backend: "sqlite", Arango: Arango{Database: "jervis", User: "root", Timeout: 30 * time.Second}},
		RAG:             RAG{Backend: "sqlite", SQLite: RAGSQLite{VectorLists: DefaultVectorLists}, Weaviate: Weaviate{Class: "JervisChunk", Timeout: 30 * time.Second}},
		Embedder: Embedder{Backend: "glove", Ollama: OllamaEmbedder{Host: "http://127.0.0.1:11434", Model: "nomic-embed-text", Timeout: 60 * time.Second},
			ClientEncoder: ClientEncoder{MinDocuments: 1000, Growth: 2, Every: 30 * time.Second}},
		Indexers:  Indexers{Concurrency: 4, BatchSize: 64, PollInterval: time.Second},
		Qualifier: Qualifier{Concurrency: 3, Batch: 16, OllamaHost: "http://127.0.0.1:11434", MaxIterations: 10, UncertainLinks: "auto"},
		Executor: Executor{IdleAfter: 30 * time.Second, Concurrency: 1, OllamaHost: "http://127.0.0.1:11434",
			MaxIterations: 500, MaxTokens: 1_000_000, MaxDuration: 15 * time.Minute},
		API: API{RateLimit: 50, RateBurst: 100, MaxBodyBytes: 1 << 20},
	}
}

// SQLitePath returns the database file: store.sqlite.path, or jervis.db in
// the data directory.
func (c Config) SQLitePath() string {
	if c.Store.SQLite.Path != "" {
		return c.Store.SQLite.Path
	}
	return filepath.Join(c.DataDir, "jervis.db")
}

// HasRole reports whether the process runs role.
func (c Config) HasRole(role string) bool { return slices.Contains(c.Roles, role) }

// Load returns the defaults overlaid with the file at path (when not empty)
// and the JERVIS_* variables of environ (os.Environ() form).
func Load(path string, environ []string) (Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		var root yaml.Node
		if err := yaml.Unmarshal(b, &root); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		if len(root.Content) > 0 {
			if err := decode(root.Content[0], reflect.ValueOf(&c).Elem(), ""); err != nil {
				return c, fmt.Errorf("config %s: %w", path, err)
			}
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, nil
}

// MemoryLimitBytes is MemoryLimit in bytes (0: none).
func (c Config) MemoryLimitBytes() (int64, error) { return ParseBytes(c.MemoryLimit) }

// ParseBytes reads a size: a whole number with an optional unit, B, KiB,
// MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (of 1000); "" is 0.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if i == 0 || err != nil {
		return 0, fmt.Errorf("%q is not a size such as 800MiB or 1GiB", s)
	}
	units := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
	u, ok := units[strings.TrimSpace(s[i:])]
	if !ok || n > math.MaxInt64/u {
		return 0, fmt.Errorf("%q is not a size such as 800MiB or 1GiB", s)
	}
	return n * u, nil
}
