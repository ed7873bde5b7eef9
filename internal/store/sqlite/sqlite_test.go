package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/internal/store/storetest"
)

func open(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, open)
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "dir", sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceFile, ExternalID: "a", Raw: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Documents["NEW"] != 1 {
		t.Fatalf("after reopen: %+v", st.Documents)
	}
}

func TestCorruptFileNamesFileAndRemedy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database ", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err == nil {
		t.Fatal("opened a corrupt file")
	}
	for _, want := range []string{path, "corrupted", "backup", "move it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLockedFileNamesFileAndRemedy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	// Another process's write transaction, held on a plain connection.
	holder, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	_, err = sqlite.Open(t.Context(), sqlite.Options{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err == nil {
		t.Fatal("opened a database another connection holds a write lock on")
	}
	for _, want := range []string{path, "locked by another process", "--data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
}

// Identity facts whose source or ref is not valid UTF-8 are replaced by
// their source and found by their ref, byte for byte.
func TestIdentityFactsKeepTheirBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	src, ref := "mail:<\xffid>", "person:\xfeo"
	fact := store.IdentityFact{Ref: ref, Kind: store.FactEmail, Value: "o@example.com", Evidence: "From: o", Seen: time.Unix(1, 0)}
	for range 2 { // the second replaces the first: the source is found
		if err := s.PutIdentityFacts(ctx, "acme", src, []store.IdentityFact{fact}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.IdentityFactsOf(ctx, "acme", []string{ref}, 10)
	if err != nil || len(got) != 1 || got[0].Ref != ref || got[0].Source != src {
		t.Fatalf("facts of %q: %+v, %v", ref, got, err)
	}
}
