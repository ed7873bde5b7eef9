//go:build unix

package sqlitedb

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jervis-dev/jervis/internal/childtest"
)

// childEnv names the -shm file a child process checks (shmLocked).
const childEnv = "SQLITEDB_TEST_SHM"

func TestMain(m *testing.M) { childtest.Main(m, childEnv, shmLocked) }

// shmLocked fails unless another process holds SQLite's lock on the WAL
// index that says the index is in use (UNIX_SHM_DMS, byte 128 of the -shm
// file: the first lock byte 120 and its eight locks).
func shmLocked(shm string) error {
	f, err := os.OpenFile(shm, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 128, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return err
	}
	if lk.Type == syscall.F_UNLCK {
		return errors.New("no process holds the WAL index's lock")
	}
	return nil
}

// The checkpointer reads the WAL index through a descriptor of its own,
// and keeps SQLite's locks on it: closing a descriptor of a file drops all
// the POSIX locks the process holds there. Opened and closed at each read,
// it dropped the lock that tells another process the index is in use, and
// a second process opening the database rebuilt it under the first (a
// `jervis serve` waited out its busy timeout while a test read its data).
func TestWALIndexKeepsSQLitesLocks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, Options{Path: path, Migrations: []string{`CREATE TABLE log (seq INTEGER PRIMARY KEY) STRICT;`}, checkpointPages: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 5 { // each commit has the checkpointer read the index
		if err := db.Write(ctx, "test", func(tx Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO log DEFAULT VALUES`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok := db.ck.walIndex(); !ok {
		t.Fatal("the WAL index did not read")
	}
	if err := childtest.Command(childEnv, path+"-shm").Run(); err != nil {
		t.Fatalf("another process sees the WAL index unlocked: %v", err)
	}
}
