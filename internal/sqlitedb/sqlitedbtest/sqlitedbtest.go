// Package sqlitedbtest helps the migration tests of the SQLite stores.
package sqlitedbtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jervis-dev/jervis/internal/sqlitedb"
)

// WrittenBefore makes a database named file in a temporary directory with
// only the given migrations (a store as an older release left it), runs
// write in one transaction on it, closes it and returns its path, for the
// store's Open to migrate the rest.
func WrittenBefore(t testing.TB, file string, migrations []string, write func(ctx context.Context, tx sqlitedb.Tx) error) string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), file)
	old, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: migrations})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Write(ctx, "rows written before", func(tx sqlitedb.Tx) error { return write(ctx, tx) }); err != nil {
		old.Close()
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Exec returns a write that runs each statement in turn.
func Exec(statements ...string) func(ctx context.Context, tx sqlitedb.Tx) error {
	return func(ctx context.Context, tx sqlitedb.Tx) error {
		for _, q := range statements {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
}
