package deploy_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/jervis-dev/jervis/internal/config"
)

// ${VAR:-default} and ${VAR:?error} as compose interpolates them with VAR
// unset (the required ones get a stand-in value).
var interpolation = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)
var required = regexp.MustCompile(`\$\{[A-Z_]+:\?[^}]*\}`)

type compose struct {
	Services map[string]struct {
		Build       any               `yaml:"build"`
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Profiles []string `yaml:"profiles"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// docker-compose.yml holds together without a Docker engine: every image
// pinned, the jervis service's JERVIS_* variables all known and valid, its
// Weaviate URL and gRPC address pointing at the weaviate service's ports,
// which are health-checked before jervis starts, and every named volume
// declared.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jervis", "mongo", "arangodb", "weaviate", "ollama"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("service %s missing", name)
		}
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[0-9][0-9A-Za-z.-]*$`)
	for name, s := range c.Services {
		if s.Build == nil && !pinned.MatchString(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a version", name, s.Image)
		}
		for _, v := range s.Volumes {
			if vol, _, ok := strings.Cut(v, ":"); ok && !strings.HasPrefix(vol, ".") && !strings.HasPrefix(vol, "/") {
				if _, declared := c.Volumes[vol]; !declared {
					t.Errorf("service %s: volume %s is not declared", name, vol)
				}
			}
		}
	}

	j := c.Services["jervis"]
	known := config.EnvVars()
	var environ []string
	for k, v := range j.Environment {
		if _, ok := known[k]; !ok && !slices.Contains(config.SecretEnvVars, k) {
			t.Errorf("jervis: %s is not a configuration variable (start-up would fail)", k)
		}
		// ${VAR:-default} as compose interpolates it with VAR unset.
		v = required.ReplaceAllString(interpolation.ReplaceAllString(v, "$1"), "secret")
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load("", environ)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("jervis's environment does not validate: %v", err)
	}
	if cfg.RAG.Backend != "weaviate" {
		t.Fatalf("rag.backend %q", cfg.RAG.Backend)
	}
	u, _ := url.Parse(cfg.RAG.Weaviate.URL)
	w, ok := c.Services[u.Hostname()]
	if !ok || !slices.Contains(w.Command, u.Port()) {
		t.Fatalf("rag.weaviate.url %s: no service %s listening on %s (%v)", u, u.Hostname(), u.Port(), w.Command)
	}
	if j.DependsOn[u.Hostname()].Condition != "service_healthy" || w.Healthcheck == nil ||
		!strings.Contains(strings.Join(w.Healthcheck.Test, " "), "/v1/.well-known/ready") {
		t.Fatal("jervis must wait for weaviate's readiness check")
	}
	if w.Environment["DEFAULT_VECTORIZER_MODULE"] != "none" {
		t.Fatal("weaviate must take Jervis's own vectors (vectorizer none)")
	}
	// Batch writes go over Weaviate's gRPC endpoint, the port the service
	// sets (GRPC_PORT).
	if host, port, err := net.SplitHostPort(cfg.RAG.Weaviate.GRPC); err != nil || host != u.Hostname() || port != w.Environment["GRPC_PORT"] {
		t.Fatalf("rag.weaviate.grpc %q: not the weaviate service's GRPC_PORT %q", cfg.RAG.Weaviate.GRPC, w.Environment["GRPC_PORT"])
	}
	for _, host := range []string{cfg.Embedder.Ollama.Host, cfg.Qualifier.OllamaHost, cfg.Executor.OllamaHost} {
		if h, _ := url.Parse(host); h.Hostname() != "ollama" {
			t.Errorf("ollama host %s is not the ollama service", host)
		}
	}
	if cfg.Store.Backend != "mongo" {
		t.Fatalf("store.backend %q", cfg.Store.Backend)
	}
	m, _ := url.Parse(cfg.Store.Mongo.URI)
	mongo, ok := c.Services[m.Hostname()]
	if !ok || !slices.Contains(mongo.Command, m.Port()) || !slices.Contains(mongo.Command, "--replSet") ||
		m.Query().Get("replicaSet") != mongo.Command[slices.Index(mongo.Command, "--replSet")+1] {
		t.Fatalf("store.mongo.uri %s: no replica-set service %s on port %s (%v)", m, m.Hostname(), m.Port(), mongo.Command)
	}
	if j.DependsOn[m.Hostname()].Condition != "service_healthy" || mongo.Healthcheck == nil ||
		!strings.Contains(strings.Join(mongo.Healthcheck.Test, " "), "rs.initiate") || !strings.Contains(strings.Join(mongo.Healthcheck.Test, " "), "isWritablePrimary ? 0 : 1") {
		t.Fatal("jervis must wait for mongo's replica set (its healthcheck initiates it)")
	}
	if cfg.Graph.Backend != "arango" {
		t.Fatalf("graph.backend %q", cfg.Graph.Backend)
	}
	a, _ := url.Parse(cfg.Graph.Arango.URL)
	arango, ok := c.Services[a.Hostname()]
	if !ok || a.Port() != "8529" || j.DependsOn[a.Hostname()].Condition != "service_healthy" || arango.Healthcheck == nil {
		t.Fatalf("graph.arango.url %s: no health-checked service %s on ArangoDB's port that jervis waits for", a, a.Hostname())
	}
	if j.Environment["JERVIS_GRAPH_ARANGO_PASSWORD"] != arango.Environment["ARANGO_ROOT_PASSWORD"] {
		t.Fatal("jervis must log in to ArangoDB with the password the service is created with")
	}
	if env, err := os.ReadFile("../.env.example"); err != nil || !strings.Contains(string(env), "JERVIS_STORE_MONGO_URI=") ||
		!strings.Contains(string(env), "ARANGO_ROOT_PASSWORD=") {
		t.Fatalf(".env.example must show how to set the store's URI: %v", err)
	}
	if !slices.Contains(j.Command, "/data") || !slices.Contains(j.Volumes, "jervis-data:/data") {
		t.Fatal("jervis's data directory must be the jervis-data volume")
	}
}

// The Dockerfile builds the binary static with the Go of go.mod.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	df := string(raw)
	for _, want := range []string{fmt.Sprintf("FROM golang:%s ", goVersion[1]), "CGO_ENABLED=0 go build", "./cmd/jervis", `ENTRYPOINT ["/jervis"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
