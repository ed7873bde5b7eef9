package email_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/email"
)

// dovecot is a Dovecot server started for one test.
type dovecot struct {
	addr    string // STARTTLS
	addrTLS string // implicit TLS
	tls     *tls.Config
}

// startDovecot runs Dovecot on a free loopback port with STARTTLS (a
// certificate made here) and one user, jervis/secret. Without Dovecot the
// test skips, except under CI=true, where .ci/run installs it.
func startDovecot(t *testing.T) dovecot {
	t.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		bin = "/usr/sbin/dovecot"
		if _, err := os.Stat(bin); err != nil {
			integration.Missing(t, "dovecot", ".ci/run installs dovecot-imapd", "apt-get install dovecot-imapd")
		}
	}
	dir, err := os.MkdirTemp("", "jervis-dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, d := range []string{"run", "state", "mail", "home"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	certFile, keyFile, pool := selfSigned(t, dir)
	os.WriteFile(filepath.Join(dir, "users"), []byte("jervis:{PLAIN}secret::::::\n"), 0o644)

	internal, login, mailUser := "dovecot", "dovenull", "dovecot"
	chroot := ""
	if os.Geteuid() != 0 {
		me, _ := user.Current()
		internal, login, mailUser = me.Username, me.Username, me.Username
	} else {
		exec.Command("chown", "-R", "dovecot:dovecot", filepath.Join(dir, "mail"), filepath.Join(dir, "home")).Run()
	}
	u, _ := user.Lookup(mailUser)
	// Two free ports, both listened on until both are known: closed one by
	// one, the second could be the first again ("duplicate listener").
	var ports [2]int
	var lns []net.Listener
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		ln.Close()
	}
	port, tlsPort := ports[0], ports[1]
	conf := fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <%[2]s
ssl_key = <%[3]s
disable_plaintext_auth = yes
auth_mechanisms = plain
mail_location = maildir:%[1]s/mail/%%u
default_internal_user = %[4]s
default_internal_group = %[4]s
default_login_user = %[5]s
first_valid_uid = 1
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[1]s/users
}
userdb {
  driver = static
  args = uid=%[6]s gid=%[7]s home=%[1]s/home/%%u
}
service imap-login {
  chroot = %[9]s
  inet_listener imap {
    address = 127.0.0.1
    port = %[8]d
  }
  inet_listener imaps {
    address = 127.0.0.1
    port = %[10]d
    ssl = yes
  }
}
service anvil {
  chroot = %[9]s
}
`, dir, certFile, keyFile, internal, login, u.Uid, u.Gid, port, chroot, tlsPort)
	confPath := filepath.Join(dir, "dovecot.conf")
	os.WriteFile(confPath, []byte(conf), 0o644)
	cmd := exec.Command(bin, "-F", "-c", confPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited: // e.g. its port was taken: never probe someone else's server
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			t.Fatalf("dovecot exited: %s\n%s", out.String(), log)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			t.Fatalf("dovecot did not start: %s\n%s", out.String(), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return dovecot{addr: addr, addrTLS: fmt.Sprintf("127.0.0.1:%d", tlsPort), tls: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
}

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o644)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// appendMail delivers messages over IMAP APPEND.
func (d dovecot) appendMail(t *testing.T, mailbox string, files ...string) {
	t.Helper()
	c, err := imapclient.DialStartTLS(d.addr, &imapclient.Options{TLSConfig: d.tls})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("jervis", "secret").Wait(); err != nil {
		t.Fatal(err)
	}
	c.Create(mailbox, nil).Wait() // exists already: fine
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd := c.Append(mailbox, int64(len(raw)), nil)
		cmd.Write(raw)
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatalf("append %s: %v", f, err)
		}
	}
	c.Logout().Wait()
}

func (d dovecot) recreate(t *testing.T, mailbox string) {
	t.Helper()
	c, err := imapclient.DialStartTLS(d.addr, &imapclient.Options{TLSConfig: d.tls})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Login("jervis", "secret").Wait()
	if err := c.Delete(mailbox).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(mailbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
}

const testdata = "testdata/"

// The Dovecot tests run one after another: each picks free ports, and
// parallel servers could race for the same one.
func TestDovecotPollsExactlyTheNewMail(t *testing.T) {
	d := startDovecot(t)
	d.appendMail(t, "INBOX", testdata+"good/alternative.eml", testdata+"good/html-only.eml", testdata+"good/iso-8859-2.eml")
	d.appendMail(t, "Archive", testdata+"good/utf8-attachment.eml", testdata+"degraded/invalid-charset.eml")

	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := email.NewIMAP(email.IMAPConfig{Addr: d.addr, TLS: email.StartTLS, TLSConfig: d.tls, Username: "jervis", Password: "secret",
		Mailboxes: []string{"INBOX", "Archive"}, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := pollers.NewScheduler(pollers.Config{Store: st}, pollers.Connection{ID: "mail", Client: "acme", Schedule: "@every 1h", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	poll := func() pollers.PollResult {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { sched.Run(ctx); close(done) }()
		var last pollers.PollResult
		deadline := time.Now().Add(20 * time.Second)
		for before := countFinished(t, st); ; {
			if evs := finished(t, st); len(evs) > before {
				last = evs[len(evs)-1]
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("poll did not finish")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		<-done
		return last
	}

	first := poll()
	if first.Fetched != 5 || first.NewVersions != 5 || first.Pages != 3 {
		t.Fatalf("first poll: %+v", first)
	}
	// More mail arrives: a reply in INBOX, and one more in Archive.
	d.appendMail(t, "INBOX", testdata+"good/reply.eml")
	d.appendMail(t, "Archive", "../filedrop/testdata/freeze.md") // not a message: quarantined later
	second := poll()
	if second.Fetched != 2 || second.NewVersions != 2 {
		t.Fatalf("second poll: %+v", second)
	}
	third := poll()
	if third.Fetched != 0 {
		t.Fatalf("nothing new, yet %+v", third)
	}
	docs, _ := st.ListDocuments(t.Context(), store.DocumentQuery{Client: "acme", Limit: 100})
	if len(docs) != 7 {
		t.Fatalf("%d documents, want 7", len(docs))
	}
	byID := map[string]store.Document{}
	for _, doc := range docs {
		if byID[doc.ExternalID].ID != "" {
			t.Fatalf("stored twice: %s", doc.ExternalID)
		}
		byID[doc.ExternalID] = doc
	}
	reply := byID["reply-1@acme.test"]
	if reply.Normalized.Metadata["inReplyTo"] != "20260303081358.4711@acme.test" || byID["20260303081358.4711@acme.test"].ID == "" {
		t.Fatalf("thread not linked: %+v", reply.Normalized.Metadata)
	}
	iso := byID["iso-1@acme.test"]
	if iso.Normalized.Title != "Porada o příjmu změn" || iso.Normalized.Metadata["mailbox"] != "INBOX" {
		t.Fatalf("ISO-8859-2 message: %+v", iso.Normalized)
	}
	bad, degraded := 0, 0
	for _, doc := range docs {
		if _, ok := doc.Normalized.Metadata[store.MetaParseError]; ok {
			bad++
		}
		if len(doc.Normalized.Warnings) > 0 {
			degraded++
		}
	}
	if bad != 1 || degraded != 1 {
		t.Fatalf("%d unparsable, want the non-message; %d kept with warnings, want the invalid charset", bad, degraded)
	}

	// UIDVALIDITY changes (the mailbox is recreated with the same mail): it
	// is read again, and nothing is stored twice.
	cursor, _ := st.GetCursor(t.Context(), "poll:mail")
	d.recreate(t, "Archive")
	d.appendMail(t, "Archive", testdata+"good/utf8-attachment.eml")
	fourth := poll()
	if fourth.Fetched != 1 || fourth.NewVersions != 0 {
		t.Fatalf("after UIDVALIDITY change: %+v", fourth)
	}
	newCursor, _ := st.GetCursor(t.Context(), "poll:mail")
	var before, after map[string]struct{ UIDValidity uint32 }
	json.Unmarshal([]byte(cursor), &before)
	json.Unmarshal([]byte(newCursor), &after)
	if before["Archive"].UIDValidity == after["Archive"].UIDValidity {
		t.Fatalf("UIDVALIDITY did not change: %s -> %s", cursor, newCursor)
	}
}

func TestDovecotImplicitTLS(t *testing.T) {
	d := startDovecot(t)
	d.appendMail(t, "INBOX", testdata+"good/reply.eml")
	src, err := email.NewIMAP(email.IMAPConfig{Addr: d.addrTLS, TLS: email.TLS, TLSConfig: d.tls, Username: "jervis", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Poll(t.Context(), "")
	if err != nil || len(b.Documents) != 1 || b.Documents[0].ExternalID != "reply-1@acme.test" {
		t.Fatalf("implicit TLS: %v %+v", err, b.Documents)
	}
}

func TestDovecotErrors(t *testing.T) {
	d := startDovecot(t)
	for _, tc := range []struct {
		cfg  email.IMAPConfig
		want string
	}{
		{email.IMAPConfig{Addr: d.addr, TLS: email.StartTLS, TLSConfig: d.tls, Username: "jervis", Password: "wrong"}, "login"},
		{email.IMAPConfig{Addr: d.addr, TLS: email.StartTLS, TLSConfig: d.tls, Username: "jervis", Password: "secret", Mailboxes: []string{"Nope"}}, "examine Nope"},
		{email.IMAPConfig{Addr: d.addr, TLS: email.StartTLS, Username: "jervis", Password: "secret"}, "certificate"},
		{email.IMAPConfig{Addr: "127.0.0.1:1", TLS: email.Plain, Username: "jervis", Password: "secret"}, "connect 127.0.0.1:1"},
	} {
		src, err := email.NewIMAP(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.Poll(t.Context(), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: err = %v, want %q", tc.cfg.Addr, tc.cfg.Mailboxes, err, tc.want)
		}
	}
}

func finished(t *testing.T, st store.Store) []pollers.PollResult {
	evs, err := st.ListEvents(t.Context(), store.EventQuery{Aggregate: pollers.AggregatePoll})
	if err != nil {
		t.Fatal(err)
	}
	var out []pollers.PollResult
	for _, e := range evs {
		if e.Type == pollers.EventPollFinished {
			var r pollers.PollResult
			json.Unmarshal(e.Data, &r)
			out = append(out, r)
		}
	}
	return out
}

func countFinished(t *testing.T, st store.Store) int { return len(finished(t, st)) }
