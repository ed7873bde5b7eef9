package kinds_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/email"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

func TestBuiltinKindsAreUnique(t *testing.T) {
	t.Parallel()
	r, err := kinds.Registry()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ConnectionTypes(); !slices.Equal(got, []string{"imap", "jira", "confluence", "git", "filedrop"}) {
		t.Fatalf("connection types %v", got)
	}
	if _, err := kinds.Registry(kinds.Builtin()[0]); err == nil {
		t.Fatal("a kind listed twice was accepted")
	}
}

// Each connection is checked by its kind, and every error names its key.
func TestConnectionsAreCheckedByTheirKind(t *testing.T) {
	t.Parallel()
	const good = `connections:
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
`
	configure := func(body string) ([]pollers.ConfiguredConnection, error) {
		p := filepath.Join(t.TempDir(), "jervis.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p, nil)
		if err != nil {
			return nil, err
		}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return kinds.Default().Configure(c.Connections, nil, t.TempDir())
	}
	conns, err := configure(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[0].Configured.(pollers.Configuration[email.IMAPSettings]).Section.Mailboxes[1] != "Sent" ||
		conns[1].Configured.(pollers.Configuration[filedrop.Settings]).Section.Path != "/srv/drop" {
		t.Fatalf("%+v", conns)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"type: imap", "type: ftp", "connections[0].type"},
		{"addr: imap.acme.test:993", "addr: imap.acme.test", "connections[0].imap.addr"},
		{"password_env: ACME_IMAP_PASSWORD", "password_env: ACME_IMAP_PASSWORD\n      password_file: /run/secret", "exactly one of password_env and password_file"},
		{"password_env: ACME_IMAP_PASSWORD", "password_env: \"\"", "exactly one of password_env and password_file"},
		{"mailboxes: [INBOX, Sent]", "mailboxes: [INBOX, Sent]\n      tls: ssl", "connections[0].imap.tls"},
		{"password_env: ACME_IMAP_PASSWORD", "pasword_env: X", "connections[0].imap.pasword_env"},
		{"    filedrop:\n", "    imap:\n      addr: x:1\n    filedrop:\n", "connections[1].imap"},
	} {
		if _, err := configure(strings.Replace(good, tc.old, tc.new, 1)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: %v, want an error naming %s", tc.old, tc.new, err, tc.want)
		}
	}
}
