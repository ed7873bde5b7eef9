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
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
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
	Log             Log           `yaml:"log"`
	Store           Store         `yaml:"store"`
	Graph           Graph         `yaml:"graph"`
	RAG             RAG           `yaml:"rag"`
	Embedder        Embedder      `yaml:"embedder"`
	Indexers        Indexers      `yaml:"indexers"`
	Qualifier       Qualifier     `yaml:"qualifier"`
	Executor        Executor      `yaml:"executor"`
	API             API           `yaml:"api"`
	// Connections are the sources the pollers watch (file only: no
	// environment overrides).
	Connections []Connection `yaml:"connections"`
}

// Connection is one source of one client.
type Connection struct {
	ID         string     `yaml:"id"`
	Client     string     `yaml:"client"`
	Type       string     `yaml:"type"`     // imap, jira, confluence, git or filedrop
	Schedule   string     `yaml:"schedule"` // robfig/cron spec, e.g. "@every 2m"
	IMAP       IMAP       `yaml:"imap"`
	Jira       Jira       `yaml:"jira"`
	Confluence Confluence `yaml:"confluence"`
	Git        Git        `yaml:"git"`
	Filedrop   Filedrop   `yaml:"filedrop"`
}

// Jira configures a jira connection.
type Jira struct {
	URL        string `yaml:"url"`
	Deployment string `yaml:"deployment"` // cloud or datacenter
	Username   string `yaml:"username"`   // Cloud: account e-mail; empty with a personal access token
	TokenEnv   string `yaml:"token_env"`
	TokenFile  string `yaml:"token_file"`
	JQL        string `yaml:"jql"` // extra filter, e.g. "project in (OPS, WEB)"
}

// Confluence configures a confluence connection.
type Confluence struct {
	URL       string   `yaml:"url"`
	Username  string   `yaml:"username"`
	TokenEnv  string   `yaml:"token_env"`
	TokenFile string   `yaml:"token_file"`
	Spaces    []string `yaml:"spaces"`
}

// Git configures a git connection (the clone lives in the data directory).
// An HTTPS remote that needs a token reads it from token_env or token_file
// (with username, default "git"), so that no secret is written in the URL;
// a URL with userinfo still works, and its secret is never echoed.
type Git struct {
	URL       string   `yaml:"url"`
	Branches  []string `yaml:"branches"` // default: all
	Username  string   `yaml:"username"`
	TokenEnv  string   `yaml:"token_env"`
	TokenFile string   `yaml:"token_file"`
}

// IMAP configures an imap connection. The password is read from an
// environment variable or a file, never written in the config.
type IMAP struct {
	Addr         string   `yaml:"addr"` // host:port
	TLS          string   `yaml:"tls"`  // tls, starttls or none
	Username     string   `yaml:"username"`
	PasswordEnv  string   `yaml:"password_env"`
	PasswordFile string   `yaml:"password_file"`
	Mailboxes    []string `yaml:"mailboxes"`
}

// Filedrop configures a watched directory.
type Filedrop struct {
	Path string `yaml:"path"`
}

// ConnectionTypes are the connection types this build can poll.
var ConnectionTypes = []string{"imap", "jira", "confluence", "git", "filedrop"}

// LookupEnv finds a variable in environ (os.Environ() form); the last one
// set wins, as with a shell.
func LookupEnv(name string, environ []string) (string, bool) {
	var v string
	var found bool
	for _, kv := range environ {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v, found = val, true
		}
	}
	return v, found
}

// Secret reads a secret named by an environment variable or a file; the
// error names where it looked, never the value.
func Secret(env, file string, environ []string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", fmt.Errorf("set one of %s and a secret file, not both", env)
	case env != "":
		if v, ok := LookupEnv(env, environ); ok {
			return v, nil
		}
		return "", fmt.Errorf("environment variable %s is not set", env)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", errors.New("no secret configured (password_env or password_file)")
}

// Secrets returns every secret value the configuration gives the process —
// the connections' passwords and tokens (from their variables and files,
// and written in their URLs), the store's and the graph's passwords, the
// API keys of the environment — and the user names that go with them in
// Basic auth, for a redact.Redactor. Secrets it cannot read are left out
// (start-up reports those).
func (c Config) Secrets(environ []string) (secrets, users []string) {
	addURL := func(raw string) {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			p, _ := u.User.Password()
			secrets = append(secrets, u.User.Username(), p)
		}
	}
	add := func(env, file string) {
		if (env != "" || file != "") && !(env != "" && file != "") {
			if v, err := Secret(env, file, environ); err == nil {
				secrets = append(secrets, v)
			}
		}
	}
	for _, conn := range c.Connections {
		switch conn.Type {
		case "imap":
			add(conn.IMAP.PasswordEnv, conn.IMAP.PasswordFile)
			users = append(users, conn.IMAP.Username)
		case "jira":
			add(conn.Jira.TokenEnv, conn.Jira.TokenFile)
			addURL(conn.Jira.URL)
			users = append(users, conn.Jira.Username)
		case "confluence":
			add(conn.Confluence.TokenEnv, conn.Confluence.TokenFile)
			addURL(conn.Confluence.URL)
			users = append(users, conn.Confluence.Username)
		case "git":
			add(conn.Git.TokenEnv, conn.Git.TokenFile)
			addURL(conn.Git.URL)
			users = append(users, conn.Git.Username)
		}
	}
	addURL(c.Store.Mongo.URI)
	for _, name := range SecretEnvVars {
		if v, ok := LookupEnv(name, environ); ok {
			secrets = append(secrets, v)
		}
	}
	if v, ok := LookupEnv("JERVIS_STORE_MONGO_URI", environ); ok {
		addURL(v)
	}
	return secrets, users
}

// Qualifier tunes the qualifier.
type Qualifier struct {
	// Concurrency is how many tasks are qualified at once.
	Concurrency int `yaml:"concurrency"`
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
	Backend  string   `yaml:"backend"` // sqlite (chunks.db in the data directory) or weaviate
	Weaviate Weaviate `yaml:"weaviate"`
}

// Embedder selects how chunks and queries become vectors. Changing it on a
// knowledge base with chunks needs a reprocess with a wipe: vectors of two
// models do not compare.
type Embedder struct {
	Backend string         `yaml:"backend"` // glove (compiled in) or ollama
	Ollama  OllamaEmbedder `yaml:"ollama"`
}

// OllamaEmbedder is the Ollama server and model of embedder.backend ollama.
type OllamaEmbedder struct {
	Host    string        `yaml:"host"`
	Model   string        `yaml:"model"`
	Timeout time.Duration `yaml:"timeout"`
}

// Weaviate locates the Weaviate server of rag.backend weaviate.
type Weaviate struct {
	URL     string        `yaml:"url"`   // e.g. http://weaviate:8080
	Class   string        `yaml:"class"` // the class holding every client's chunks
	Timeout time.Duration `yaml:"timeout"`
}

// SQLite configures the embedded store.
type SQLite struct {
	// Path of the database file; default <data_dir>/jervis.db.
	Path string `yaml:"path"`
	// BusyTimeout is how long a write waits for another process's lock.
	BusyTimeout time.Duration `yaml:"busy_timeout"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		DataDir:         "./data",
		Listen:          "127.0.0.1:8080",
		Roles:           slices.Clone(Roles),
		ShutdownTimeout: 10 * time.Second,
		Log:             Log{Level: "info", Format: "text"},
		Store:           Store{Backend: "sqlite", SQLite: SQLite{BusyTimeout: 5 * time.Second}, Mongo: Mongo{Timeout: 30 * time.Second}},
		Graph:           Graph{Backend: "sqlite", Arango: Arango{Database: "jervis", User: "root", Timeout: 30 * time.Second}},
		RAG:             RAG{Backend: "sqlite", Weaviate: Weaviate{Class: "JervisChunk", Timeout: 30 * time.Second}},
		Embedder:        Embedder{Backend: "glove", Ollama: OllamaEmbedder{Host: "http://127.0.0.1:11434", Model: "nomic-embed-text", Timeout: 60 * time.Second}},
		Indexers:        Indexers{Concurrency: 4, BatchSize: 64, PollInterval: time.Second},
		Qualifier:       Qualifier{Concurrency: 4, OllamaHost: "http://127.0.0.1:11434", MaxIterations: 10, UncertainLinks: "auto"},
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

// decode sets v from node, naming the key path in every error.
func decode(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Duration]() {
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
			return nil
		}
		if node.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s: want a mapping of keys, got %s", node.Line, orRoot(path), kind(node))
		}
		fields := yamlFields(v.Type())
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i], node.Content[i+1]
			idx, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("line %d: unknown key %q (known keys%s: %s)", key.Line, join(path, key.Value), inPath(path), strings.Join(sortedKeys(fields), ", "))
			}
			if err := decode(val, v.Field(idx), join(path, key.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	if v.Kind() == reflect.Slice {
		if node.Kind != yaml.SequenceNode {
			return fmt.Errorf("line %d: %s: want a list, got %s", node.Line, path, kind(node))
		}
		if len(node.Content) == 0 {
			v.Set(reflect.Zero(v.Type())) // "[]" is the same as leaving it out
			return nil
		}
		out := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		for i, item := range node.Content {
			if err := decode(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want a single value, got %s", node.Line, path, kind(node))
	}
	if err := setScalar(v, node.Value); err != nil {
		return fmt.Errorf("line %d: %s: %w", node.Line, path, err)
	}
	return nil
}

// setScalar parses s into v by v's type.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (examples: 500ms, 30s, 5m)", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

// EnvVars maps every JERVIS_* variable to its key path.
func EnvVars() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := join(path, f.Tag.Get("yaml"))
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(f.Type, p)
				continue
			}
			out[envName(p)] = p
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}

func envName(path string) string {
	return "JERVIS_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(path))
}

func applyEnv(c *Config, environ []string) error {
	known := EnvVars()
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "JERVIS_") || slices.Contains(SecretEnvVars, name) {
			continue
		}
		path, ok := known[name]
		if !ok {
			return fmt.Errorf("config: environment variable %s is not a setting (known: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
		if err := setScalar(field(reflect.ValueOf(c).Elem(), path), value); err != nil {
			return fmt.Errorf("config: %s (%s): %w", name, path, err)
		}
	}
	return nil
}

// field returns the field at a dotted key path.
func field(v reflect.Value, path string) reflect.Value {
	for _, part := range strings.Split(path, ".") {
		v = v.Field(yamlFields(v.Type())[part])
	}
	return v
}

// Validate reports the first setting that cannot work, naming its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "must not be empty")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (%v)", c.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("listen", "port %q is not 0-65535", port)
	}
	if len(c.Roles) == 0 {
		bad("roles", "must name at least one of %s", strings.Join(Roles, ", "))
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) {
			bad("roles", "%q is not one of %s", r, strings.Join(Roles, ", "))
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "%q is not text or json", c.Log.Format)
	}
	switch c.Embedder.Backend {
	case "glove":
	case "ollama":
		if !isHTTPURL(c.Embedder.Ollama.Host) {
			bad("embedder.ollama.host", "%q is not an http(s) URL", c.Embedder.Ollama.Host)
		}
		if strings.TrimSpace(c.Embedder.Ollama.Model) == "" {
			bad("embedder.ollama.model", "required with embedder.backend ollama")
		}
		if c.Embedder.Ollama.Timeout <= 0 {
			bad("embedder.ollama.timeout", "%s is not positive", c.Embedder.Ollama.Timeout)
		}
	default:
		bad("embedder.backend", "%q is not glove or ollama", c.Embedder.Backend)
	}
	switch c.Graph.Backend {
	case "sqlite":
	case "arango":
		if !isHTTPURL(c.Graph.Arango.URL) {
			bad("graph.arango.url", "%q is not an http(s) URL (graph.backend is arango)", c.Graph.Arango.URL)
		}
		if c.Graph.Arango.Database == "" {
			bad("graph.arango.database", "required with graph.backend arango")
		}
		if c.Graph.Arango.Timeout <= 0 {
			bad("graph.arango.timeout", "%s is not positive", c.Graph.Arango.Timeout)
		}
	default:
		bad("graph.backend", "%q is not sqlite or arango", c.Graph.Backend)
	}
	switch c.RAG.Backend {
	case "sqlite":
	case "weaviate":
		if !isHTTPURL(c.RAG.Weaviate.URL) {
			bad("rag.weaviate.url", "%q is not an http(s) URL (rag.backend is weaviate)", c.RAG.Weaviate.URL)
		}
		if c.RAG.Weaviate.Timeout <= 0 {
			bad("rag.weaviate.timeout", "%s is not positive", c.RAG.Weaviate.Timeout)
		}
	default:
		bad("rag.backend", "%q is not sqlite or weaviate", c.RAG.Backend)
	}
	switch c.Store.Backend {
	case "sqlite":
	case "mongo":
		if u, err := url.Parse(c.Store.Mongo.URI); err != nil || (u.Scheme != "mongodb" && u.Scheme != "mongodb+srv") {
			bad("store.mongo.uri", "not a mongodb:// or mongodb+srv:// URI (store.backend is mongo)")
		}
		if c.Store.Mongo.Timeout <= 0 {
			bad("store.mongo.timeout", "%s is not positive", c.Store.Mongo.Timeout)
		}
	default:
		bad("store.backend", "%q is not sqlite or mongo", c.Store.Backend)
	}
	if c.Store.SQLite.BusyTimeout <= 0 {
		bad("store.sqlite.busy_timeout", "must be positive, got %s", c.Store.SQLite.BusyTimeout)
	}
	ids := map[string]bool{}
	for i, conn := range c.Connections {
		key := fmt.Sprintf("connections[%d]", i)
		switch {
		case conn.ID == "":
			bad(key+".id", "required")
		case ids[conn.ID]:
			bad(key+".id", "%q is used twice", conn.ID)
		}
		ids[conn.ID] = true
		if !clientID.MatchString(conn.Client) {
			bad(key+".client", "%q must match %s", conn.Client, clientID)
		}
		if conn.Schedule == "" {
			bad(key+".schedule", `required (a cron spec such as "@every 2m")`)
		} else if _, err := cronParser.Parse(conn.Schedule); err != nil {
			bad(key+".schedule", "%q: %v", conn.Schedule, err)
		}
		switch conn.Type {
		case "imap":
			if _, _, err := net.SplitHostPort(conn.IMAP.Addr); err != nil {
				bad(key+".imap.addr", "%q is not host:port", conn.IMAP.Addr)
			}
			if conn.IMAP.Username == "" {
				bad(key+".imap.username", "required")
			}
			if (conn.IMAP.PasswordEnv == "") == (conn.IMAP.PasswordFile == "") {
				bad(key+".imap", "set exactly one of password_env and password_file")
			}
			if t := conn.IMAP.TLS; t != "" && t != "tls" && t != "starttls" && t != "none" {
				bad(key+".imap.tls", "%q is not tls, starttls or none", t)
			}
		case "jira":
			if !strings.HasPrefix(conn.Jira.URL, "http") {
				bad(key+".jira.url", "%q is not an http(s) URL", conn.Jira.URL)
			}
			if d := conn.Jira.Deployment; d != "" && d != "cloud" && d != "datacenter" {
				bad(key+".jira.deployment", "%q is not cloud or datacenter", d)
			}
			if (conn.Jira.TokenEnv == "") == (conn.Jira.TokenFile == "") {
				bad(key+".jira", "set exactly one of token_env and token_file")
			}
		case "confluence":
			if !strings.HasPrefix(conn.Confluence.URL, "http") {
				bad(key+".confluence.url", "%q is not an http(s) URL", conn.Confluence.URL)
			}
			if (conn.Confluence.TokenEnv == "") == (conn.Confluence.TokenFile == "") {
				bad(key+".confluence", "set exactly one of token_env and token_file")
			}
		case "git":
			if conn.Git.URL == "" {
				bad(key+".git.url", "required")
			}
			if conn.Git.TokenEnv != "" && conn.Git.TokenFile != "" {
				bad(key+".git", "set at most one of token_env and token_file")
			}
		case "filedrop":
			if conn.Filedrop.Path == "" {
				bad(key+".filedrop.path", "required")
			}
		default:
			bad(key+".type", "%q is not one of %s", conn.Type, strings.Join(ConnectionTypes, ", "))
		}
	}
	if c.Qualifier.Concurrency < 1 || c.Qualifier.Concurrency > 256 {
		bad("qualifier.concurrency", "%d is not 1..256", c.Qualifier.Concurrency)
	}
	if c.Qualifier.MaxIterations < 1 || c.Qualifier.MaxIterations > 100 {
		bad("qualifier.max_iterations", "%d is not 1..100", c.Qualifier.MaxIterations)
	}
	switch u := c.Qualifier.UncertainLinks; u {
	case "auto", "record", "fetch":
	case "model":
		if c.Qualifier.Model == "" {
			bad("qualifier.uncertain_links", "model needs qualifier.model")
		}
	default:
		bad("qualifier.uncertain_links", "%q is not auto, record, fetch or model", u)
	}
	if c.Executor.IdleAfter < 0 {
		bad("executor.idle_after", "%s is negative", c.Executor.IdleAfter)
	}
	if c.Executor.Concurrency < 1 || c.Executor.Concurrency > 64 {
		bad("executor.concurrency", "%d is not 1..64", c.Executor.Concurrency)
	}
	if c.Executor.MaxIterations < 1 || c.Executor.MaxIterations > 10_000 {
		bad("executor.max_iterations", "%d is not 1..10000", c.Executor.MaxIterations)
	}
	if c.Executor.MaxTokens < 1 {
		bad("executor.max_tokens", "%d is not positive", c.Executor.MaxTokens)
	}
	if c.Executor.MaxDuration <= 0 {
		bad("executor.max_duration", "%s is not positive", c.Executor.MaxDuration)
	}
	if c.API.RateLimit < 0 {
		bad("api.rate_limit", "%v is negative (0: no limit)", c.API.RateLimit)
	}
	if c.API.RateBurst < 1 {
		bad("api.rate_burst", "%d is not at least 1", c.API.RateBurst)
	}
	if c.API.MaxBodyBytes < 1<<10 || c.API.MaxBodyBytes > 1<<30 {
		bad("api.max_body_bytes", "%d is not 1024..1073741824", c.API.MaxBodyBytes)
	}
	if c.Indexers.Concurrency < 1 || c.Indexers.Concurrency > 256 {
		bad("indexers.concurrency", "%d is not 1..256", c.Indexers.Concurrency)
	}
	if c.Indexers.BatchSize < 1 || c.Indexers.BatchSize > 10_000 {
		bad("indexers.batch_size", "%d is not 1..10000", c.Indexers.BatchSize)
	}
	if c.Indexers.PollInterval < 10*time.Millisecond {
		bad("indexers.poll_interval", "%s is shorter than 10ms", c.Indexers.PollInterval)
	}
	return errors.Join(errs...)
}

func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		out[t.Field(i).Tag.Get("yaml")] = i
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string { return cmp.Or(path, "the document") }

func inPath(path string) string {
	if path == "" {
		return ""
	}
	return " under " + path
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

// isHTTPURL reports whether s is an absolute http(s) URL with a host: the
// address of a server backend.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}
