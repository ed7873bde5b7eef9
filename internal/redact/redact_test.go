package redact_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		// Git and Atlassian: credentials in the userinfo, a token as the user name.
		{"https://ann:ghp_TOKEN123@github.com/acme/repo.git", "https://REDACTED@github.com/acme/repo.git"},
		{"https://ghp_TOKEN123@github.com/acme/repo.git", "https://REDACTED@github.com/acme/repo.git"},
		{"https://bot:s3cr3t@acme.atlassian.net/wiki", "https://REDACTED@acme.atlassian.net/wiki"},
		// MongoDB: one host and several, with query-string secrets.
		{"mongodb://jervis:pw-123456@mongo:27017/jervis?authSource=admin&tlsCertificateKeyFilePassword=kfp-999999",
			"mongodb://REDACTED@mongo:27017/jervis?authSource=admin&tlsCertificateKeyFilePassword=REDACTED"},
		{"mongodb://jervis:pw-123456@m1:27017,m2:27017/jervis?replicaSet=rs0&tlsCertificateKeyFilePassword=kfp-999999",
			"mongodb://REDACTED@m1:27017,m2:27017/jervis?replicaSet=rs0&tlsCertificateKeyFilePassword=REDACTED"},
		{"mongodb+srv://u:p4ssw0rd@cluster0.example.net/?retryWrites=true", "mongodb+srv://REDACTED@cluster0.example.net/?retryWrites=true"},
		// ArangoDB, Weaviate, Ollama addresses.
		{"http://root:arango-pass@arangodb:8529", "http://REDACTED@arangodb:8529"},
		{"https://weaviate.example.net:8080/v1?api_key=wv-KEY-42", "https://weaviate.example.net:8080/v1?api_key=REDACTED"},
		{"http://ollama:11434", "http://ollama:11434"},
		{"https://gpu.example.net:11434/?token=abc123&model=qwen", "https://gpu.example.net:11434/?model=qwen&token=REDACTED"},
		// Nothing to hide.
		{"https://wiki.acme.test/ops?page=2", "https://wiki.acme.test/ops?page=2"},
		{"not a url", "not a url"},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("URL(%q)\n  = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// A Redactor removes the secrets the process knows, also when a server
// echoes them back (a token in an error page, Basic auth in base64), and
// every URL's secrets in free text.
func TestRedactorText(t *testing.T) {
	t.Parallel()
	r := redact.New([]string{"JIRATOKEN-9f8e7d", "short"}, "bot@acme.test")
	basic := base64.StdEncoding.EncodeToString([]byte("bot@acme.test:JIRATOKEN-9f8e7d"))
	in := `jira: https://acme.atlassian.net: HTTP 500: {"echo":"JIRATOKEN-9f8e7d","auth":"Basic ` + basic + `"} Get "https://u:hunter22@git.acme.test/r.git": EOF (short)`
	got := r.Text(in)
	for _, secret := range []string{"JIRATOKEN-9f8e7d", basic, "hunter22"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q survives: %s", secret, got)
		}
	}
	if !strings.Contains(got, "https://acme.atlassian.net") || !strings.Contains(got, "(short)") {
		t.Errorf("too much removed: %s", got)
	}
	var nilR *redact.Redactor
	if got := nilR.Text("https://a:b@c.test/"); got != "https://REDACTED@c.test/" {
		t.Errorf("nil redactor: %s", got)
	}
}

// What a client's key reads names our servers by host name only.
func TestForClient(t *testing.T) {
	t.Parallel()
	in := `store chunks: Post "http://weaviate:8080/v1/graphql": dial tcp 172.18.0.3:8080: connect: connection refused; [fd00::5]:27017 down
goroutine 7 [running]:
main.main()
	/src/main.go:12`
	got := redact.ForClient(in)
	want := `store chunks: Post "http://weaviate": dial tcp [address]: connect: connection refused; [address] down [stack trace removed]`
	if got != want {
		t.Fatalf("ForClient:\n got %q\nwant %q", got, want)
	}
}

// The log handler redacts messages and string, error and group attributes.
func TestHandler(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	log := slog.New(redact.New([]string{"ENVSECRET-123"}).Handler(slog.NewTextHandler(&b, nil)))
	log.With("base", "https://u:p4ss@x.test").Warn("poll failed for https://t0ken@git.test/r", "err", errors.New("echo ENVSECRET-123"),
		slog.Group("server", "uri", "mongodb://a:b@m/db"))
	out := b.String()
	for _, secret := range []string{"p4ss", "t0ken", "ENVSECRET-123", "a:b@"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q in the log: %s", secret, out)
		}
	}
	if strings.Count(out, "REDACTED") != 4 {
		t.Errorf("log: %s", out)
	}
}
