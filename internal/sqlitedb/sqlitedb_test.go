package sqlitedb

import (
	"path/filepath"
	"testing"
)

// A write transaction's data statements are prepared after it commits and
// run prepared from then on, with the same results; a multi-statement
// script and schema changes are never prepared (a prepared statement would
// run only the first of several, every time).
func TestWriteStatementsPreparedOnceKnown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "t.db"), Migrations: []string{`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT;`}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const (
		upsert = `INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = kv.v + excluded.v`
		read   = `SELECT v FROM kv WHERE k = ?`
		script = `INSERT INTO kv (k, v) VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1; INSERT INTO kv (k, v) VALUES ('b', 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1`
	)
	for i := range 3 {
		var got int
		err := db.Write(ctx, "test", func(tx Tx) error {
			if _, err := tx.ExecContext(ctx, upsert, "x", 2); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, script); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS other (x INTEGER)`); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, read, "x").Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != 2*(i+1) {
			t.Fatalf("round %d: x = %d, want %d", i, got, 2*(i+1))
		}
		db.writeMu.Lock()
		_, up := db.stmts[upsert]
		_, rd := db.stmts[read]
		_, sc := db.stmts[script]
		n := len(db.stmts)
		db.writeMu.Unlock()
		if !up || !rd || sc || n != 2 {
			t.Fatalf("round %d: prepared upsert %v, read %v, script %v, %d in all", i, up, rd, sc, n)
		}
	}
	var a, b int
	if err := db.R.QueryRowContext(ctx, `SELECT (SELECT v FROM kv WHERE k = 'a'), (SELECT v FROM kv WHERE k = 'b')`).Scan(&a, &b); err != nil || a != 3 || b != 3 {
		t.Fatalf("the script ran a=%d b=%d times (%v), want 3 each", a, b, err)
	}
}

func TestPreparable(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"SELECT 1":                             true,
		"\n\tinsert into t values (1);":        true,
		"WITH x AS (SELECT 1) SELECT * FROM x": true,
		"DELETE FROM t; DELETE FROM u":         false,
		"CREATE TABLE t (x)":                   false,
		"PRAGMA user_version = 3":              false,
		"":                                     false,
	} {
		if got := preparable(q); got != want {
			t.Errorf("preparable(%q) = %v", q, got)
		}
	}
}
