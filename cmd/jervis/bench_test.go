package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/config"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
	"github.com/jervis-dev/jervis/pollers/kinds"
)

// BenchmarkImport reports documents/s for `jervis import` (parse, store,
// index into tasks) of .eml files and of Jira issues (search responses of
// 100 issues), and separately the indexing part.
func BenchmarkImport(b *testing.B) {
	for _, kind := range []string{"email", "jira"} {
		b.Run(kind, func(b *testing.B) {
			in := b.TempDir()
			writeCorpus(b, in, kind, b.N)
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), sqlite.FileName)})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			a := &app{cfg: config.Default(), kinds: kinds.Default(), stderr: io.Discard, log: newLogger(io.Discard, config.Log{Level: "error"}, nil)}
			b.ResetTimer()
			start := time.Now()
			sum, err := a.importPaths(context.Background(), st, "bench", []string{in}, false)
			if err != nil {
				b.Fatal(err)
			}
			stored := time.Since(start)
			if err := a.indexAll(context.Background(), st); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if sum.NewVersions != b.N {
				b.Fatalf("%d new of %d", sum.NewVersions, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(float64(b.N)/stored.Seconds(), "stored-docs/s")
			b.ReportMetric(float64(b.N)/(b.Elapsed()-stored).Seconds(), "indexed-docs/s")
		})
	}
}

func writeCorpus(b *testing.B, dir, kind string, n int) {
	b.Helper()
	switch kind {
	case "email":
		for i := range n {
			msg := fmt.Sprintf("From: Ann Novak <ann@acme.test>\r\nTo: bob@acme.test\r\nSubject: Status of OPS-%d\r\nDate: Tue, 03 Mar 2026 09:13:58 +0100\r\nMessage-ID: <bench-%d@acme.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHi Bob,\r\n\r\nOPS-%d is blocked on the certificate rotation, see https://wiki.acme.test/ops/%d and https://jira.acme.test/browse/OPS-%d.\r\n\r\nAnn\r\n", i, i, i, i%40, i)
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%06d.eml", i)), []byte(msg), 0o644)
		}
	case "jira":
		for f := 0; f*100 < n; f++ {
			var issues []map[string]any
			for i := f * 100; i < min(n, (f+1)*100); i++ {
				issues = append(issues, map[string]any{"id": fmt.Sprint(i), "key": fmt.Sprintf("OPS-%d", i), "fields": map[string]any{
					"summary": fmt.Sprintf("Rotate certificate %d", i), "status": map[string]any{"name": "Open"},
					"assignee":    map[string]any{"emailAddress": "bob@acme.test", "displayName": "Bob"},
					"description": fmt.Sprintf("Expires soon, see https://wiki.acme.test/certs/%d.", i%30),
					"issuelinks":  []any{map[string]any{"type": map[string]any{"name": "Blocks", "outward": "blocks"}, "outwardIssue": map[string]any{"key": "OPS-1"}}},
					"updated":     "2026-03-02T09:12:44.000+0100"}})
			}
			raw, _ := json.Marshal(map[string]any{"startAt": 0, "total": len(issues), "issues": issues})
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("search-%04d.json", f)), raw, 0o644)
		}
	}
}
