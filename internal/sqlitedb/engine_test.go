package sqlitedb

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"modernc.org/libc"
)

// The engine was set up before any database opened: SQLite allocates from
// the arenas, and a database's page caches are groups of their own — the
// shared group's page budget stays empty while a writer holds a 16 MiB
// cache, and what SQLite allocated for a database is given back when it
// closes. (Not parallel: the arenas' count is the process's.)
func TestEngineIsSetUp(t *testing.T) {
	if err := EngineErr(); err != nil {
		t.Fatal(err)
	}
	if pcache1.FseparateCache != 1 {
		t.Fatal("SQLite's page caches share one group")
	}
	ctx := t.Context()
	before := arenaLive()
	db, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE kv (k TEXT PRIMARY KEY, v BLOB NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, "fill", func(tx Tx) error {
		for i := range 2000 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES (?, ?)`, fmt.Sprint("key", i), bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM kv WHERE length(v) = 1000`).Scan(&n); err != nil || n != 2000 {
		t.Fatalf("read back %d rows, %v", n, err)
	}
	// 2,000 rows of a kilobyte fill about 500 pages of 4 KiB, in the writer's cache.
	if grown := arenaLive() - before; grown < 2<<20 {
		t.Fatalf("SQLite allocated %d bytes from the arenas for 2 MB of rows", grown)
	}
	if pcache1.Fgrp.FnMaxPage != 0 {
		t.Fatalf("the shared page cache group holds a budget of %d pages", pcache1.Fgrp.FnMaxPage)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// What SQLite keeps for the process (its VFS's file list, mutexes) is small.
	if left := arenaLive() - before; left > 64<<10 {
		t.Fatalf("%d bytes still allocated after the database closed", left)
	}
}

// SQLite's xRealloc keeps the bytes it had, in place while the block has
// room, and xSize says what was last asked for.
func TestArenaRealloc(t *testing.T) {
	tls := libc.NewTLS()
	defer tls.Close()
	bytesAt := func(p uintptr, n int) []byte { return unsafe.Slice(at[byte](p), n) }
	p := arenaMalloc(tls, 24)
	if p == 0 || arenaSize(tls, p) != 24 || p%8 != 0 {
		t.Fatalf("malloc(24): %#x, size %d", p, arenaSize(tls, p))
	}
	for i, c := range []byte("twenty-four bytes of it!") { // (copy from a string here crashes go1.26's compiler)
		bytesAt(p, 24)[i] = c
	}
	q := arenaRealloc(tls, p, 20000)
	if q == 0 || arenaSize(tls, q) != 20000 || string(bytesAt(q, 24)) != "twenty-four bytes of it!" {
		t.Fatalf("realloc(20000): %#x, size %d, %q", q, arenaSize(tls, q), bytesAt(q, 24))
	}
	r := arenaRealloc(tls, q, 16)
	if r != q || arenaSize(tls, r) != 16 || string(bytesAt(r, 16)) != "twenty-four byte" {
		t.Fatalf("realloc(16) of a 20,000-byte block: %#x (was %#x), size %d", r, q, arenaSize(tls, r))
	}
	arenaFree(tls, r)
	arenaFree(tls, 0)
	if arenaMalloc(tls, 0) != 0 || arenaRoundup(tls, 13) != 16 {
		t.Fatal("malloc(0) or roundup(13)")
	}
}

// Databases written and read at once from several goroutines (their
// allocations in different arenas, freed by whichever connection frees
// them) keep every row.
func TestDatabasesWrittenAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const dbs, rows = 4, 1500
	var wg sync.WaitGroup
	errs := make(chan error, dbs*2)
	opened := make([]*DB, dbs)
	for d := range dbs {
		db := openKV(t)
		opened[d] = db
		wg.Go(func() {
			for b := range rows / 100 {
				if err := db.Write(ctx, "fill", func(tx Tx) error {
					for i := range 100 {
						if _, err := tx.ExecContext(ctx, upsert, fmt.Sprintf("%d-%d-%s", d, b*100+i, strings.Repeat("x", 200)), b*100+i); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range 200 {
				var n int
				if err := db.QueryRow(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for d, db := range opened {
		var n, sum int
		if err := db.QueryRow(ctx, `SELECT count(*), sum(v) FROM kv`).Scan(&n, &sum); err != nil || n != rows || sum != rows*(rows-1)/2 {
			t.Errorf("database %d: %d rows summing to %d, %v", d, n, sum, err)
		}
	}
}
