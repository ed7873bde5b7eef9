package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/config"
)

func TestExampleFileIsTheDefaults(t *testing.T) {
	t.Parallel()
	got, err := config.Load("../../deploy/jervis.example.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := config.Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("deploy/jervis.example.yaml differs from the defaults:\n got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestExampleFileDocumentsEveryEnvVar(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/jervis.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range config.EnvVars() {
		last := path[strings.LastIndex(path, ".")+1:]
		if !strings.Contains(string(b), last+":") {
			t.Errorf("the example file does not show %s (%s)", path, name)
		}
	}
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "jervis.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOverlaysFileThenEnv(t *testing.T) {
	t.Parallel()
	p := write(t, "data_dir: /var/lib/jervis\nroles: [api, indexers]\nlog:\n  level: debug\nstore:\n  sqlite:\n    busy_timeout: 2s\n")
	c, err := config.Load(p, []string{"JERVIS_LOG_LEVEL=warn", "JERVIS_ROLES=api, qualifier", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/jervis" || c.Log.Level != "warn" || c.Log.Format != "text" ||
		!reflect.DeepEqual(c.Roles, []string{"api", "qualifier"}) || c.Store.SQLite.BusyTimeout != 2*time.Second {
		t.Fatalf("got %+v", c)
	}
	if c.SQLitePath() != filepath.Join("/var/lib/jervis", "jervis.db") {
		t.Fatalf("sqlite path %s", c.SQLitePath())
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		env        []string
		want       []string
	}{
		{"unknown key", "log:\n  levle: debug\n", nil, []string{"line 2", `"log.levle"`, "level"}},
		{"unknown top key", "listne: 1\n", nil, []string{"line 1", `"listne"`, "listen"}},
		{"wrong type duration", "shutdown_timeout: soon\n", nil, []string{"line 1", "shutdown_timeout", `"soon" is not a duration`}},
		{"wrong shape", "log: loud\n", nil, []string{"log", "mapping"}},
		{"list expected", "roles: api\n", nil, []string{"roles", "want a list"}},
		{"unknown env", "", []string{"JERVIS_LISTNE=x"}, []string{"JERVIS_LISTNE", "not a setting"}},
		{"bad env value", "", []string{"JERVIS_STORE_SQLITE_BUSY_TIMEOUT=5"}, []string{"JERVIS_STORE_SQLITE_BUSY_TIMEOUT", "store.sqlite.busy_timeout", "not a duration"}},
		{"yaml syntax", "log: [\n", nil, []string{"jervis.yaml", "yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tc.file != "" {
				path = write(t, tc.file)
			}
			_, err := config.Load(path, tc.env)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mutate func(*config.Config)
		want   string
	}{
		{func(c *config.Config) { c.Log.Level = "loud" }, "log.level"},
		{func(c *config.Config) { c.Log.Format = "xml" }, "log.format"},
		{func(c *config.Config) { c.Listen = "8080" }, "listen"},
		{func(c *config.Config) { c.Roles = []string{"api", "gpu"} }, `roles: "gpu"`},
		{func(c *config.Config) { c.Roles = nil }, "roles"},
		{func(c *config.Config) { c.Store.Backend = "mongo" }, "store.backend"},
		{func(c *config.Config) { c.RAG.Backend = "qdrant" }, "rag.backend"},
		{func(c *config.Config) { c.Embedder.Backend = "openai" }, "embedder.backend"},
		{func(c *config.Config) { c.Embedder.Backend, c.Embedder.Ollama.Model = "ollama", " " }, "embedder.ollama.model"},
		{func(c *config.Config) { c.Embedder.Backend, c.Embedder.Ollama.Host = "ollama", "ollama:11434" }, "embedder.ollama.host"},
		{func(c *config.Config) { c.RAG.Backend = "weaviate" }, "rag.weaviate.url"},
		{func(c *config.Config) { c.RAG.SQLite.VectorLists = 500 }, "rag.sqlite.vector_lists"},
		{func(c *config.Config) { c.RAG.SQLite.VectorLists = -1 }, "rag.sqlite.vector_lists"},
		{func(c *config.Config) { c.Embedder.ClientEncoder.MinDocuments = -1 }, "embedder.client_encoder.min_documents"},
		{func(c *config.Config) { c.Embedder.ClientEncoder.Growth = 1 }, "embedder.client_encoder.growth"},
		{func(c *config.Config) { c.Embedder.ClientEncoder.Every = 0 }, "embedder.client_encoder.every"},
		{func(c *config.Config) { c.RAG.Backend, c.RAG.Weaviate.URL = "weaviate", "weaviate:8080" }, "rag.weaviate.url"},
		{func(c *config.Config) {
			c.RAG.Backend, c.RAG.Weaviate.URL, c.RAG.Weaviate.GRPC = "weaviate", "http://weaviate:8080", "weaviate"
		}, "rag.weaviate.grpc"},
		{func(c *config.Config) { c.ShutdownTimeout = 0 }, "shutdown_timeout"},
		{func(c *config.Config) { c.MemoryLimit = "1 gigabyte" }, "memory_limit"},
		{func(c *config.Config) { c.GCPercent = 0 }, "gc_percent"},
		{func(c *config.Config) { c.GCPercent = 5000 }, "gc_percent"},
		{func(c *config.Config) { c.DataDir = " " }, "data_dir"},
	} {
		c := config.Default()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want it to name %q", err, tc.want)
		}
	}
}

func TestMissingFileIsAnError(t *testing.T) {
	t.Parallel()
	if _, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), nil); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestConnections(t *testing.T) {
	t.Parallel()
	p := write(t, `connections:
  - id: acme-mail
    client: acme
    type: imap
    schedule: "@every 2m"
    imap:
      addr: imap.acme.test:993
      username: jervis@acme.test
      password_env: ACME_IMAP_PASSWORD
      mailboxes: [INBOX, Sent]
  - id: acme-drop
    client: acme
    type: filedrop
    schedule: "*/5 * * * *"
    filedrop:
      path: /srv/drop
`)
	c, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// The sections are the kinds' to read (pollers/email reads imap:).
	if len(c.Connections) != 2 || c.Connections[0].Sections["imap"] == nil || c.Connections[1].Sections["filedrop"] == nil {
		t.Fatalf("%+v", c.Connections)
	}
	for _, tc := range []struct {
		mutate func(*config.Connection)
		want   string
	}{
		{func(c *config.Connection) { c.ID = "" }, "connections[0].id"},
		{func(c *config.Connection) { c.Client = "Acme Corp" }, "connections[0].client"},
		{func(c *config.Connection) { c.Schedule = "sometimes" }, "connections[0].schedule"},
		{func(c *config.Connection) { c.Type = "" }, "connections[0].type"},
	} {
		bad := c
		bad.Connections = append([]config.Connection(nil), c.Connections...)
		tc.mutate(&bad.Connections[0])
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
	dup := c
	dup.Connections = []config.Connection{c.Connections[1], c.Connections[1]}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("duplicate id: %v", err)
	}
}

func TestSecret(t *testing.T) {
	t.Parallel()
	env := []string{"A=1", "IMAP_PW=s3cret"}
	if v, err := config.Secret("IMAP_PW", "", env); err != nil || v != "s3cret" {
		t.Fatalf("%q %v", v, err)
	}
	f := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(f, []byte("from-file\n"), 0o600)
	if v, err := config.Secret("", f, env); err != nil || v != "from-file" {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := config.Secret("MISSING", "", env); err == nil || !strings.Contains(err.Error(), "MISSING is not set") {
		t.Fatalf("missing env: %v", err)
	}
	if _, err := config.Secret("", "", env); err == nil {
		t.Fatal("no secret accepted")
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"": 0, "0": 0, "512": 512, "800MiB": 800 << 20, "1GiB": 1 << 30, " 2 GB ": 2e9, "64KiB": 64 << 10, "3B": 3} {
		if got, err := config.ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"GiB", "1.5GiB", "-1GiB", "1 gigabyte", "99999999999TiB"} {
		if _, err := config.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) took it", bad)
		}
	}
}
