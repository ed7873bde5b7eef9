package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

func TestStatusPrintsModelUsageWhenThereIsAny(t *testing.T) {
	s := store.NewStats()
	s.AddTasks("acme", store.KindData, store.TaskDone, 4)
	var none strings.Builder
	if err := printStats(&none, s); err != nil || strings.Contains(none.String(), "MODEL USAGE") {
		t.Fatalf("no model calls, yet:\n%s %v", none.String(), err)
	}
	s.ModelUsage["DATA_PROCESSING"] = store.UsageTotals{Tasks: 4, ModelCalls: 5, PromptTokens: 1600, OutputTokens: 120}
	var out strings.Builder
	if err := printStats(&out, s); err != nil {
		t.Fatal(err)
	}
	var row []string
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "DATA_PROCESSING" {
			row = f
		}
	}
	if strings.Join(row, " ") != "DATA_PROCESSING 4 5 1.25 1600 120" {
		t.Fatalf("model usage row %q in:\n%s", row, out.String())
	}
}

func TestStatusPrintsWaitingAndFailures(t *testing.T) {
	s := store.NewStats()
	s.OldestWaiting["tasks.READY_FOR_GPU"] = time.Now().Add(-90 * time.Second)
	s.Failures["documents.bad_mime"] = 3
	var out strings.Builder
	if err := printStats(&out, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tasks.READY_FOR_GPU  1m30s", "documents.bad_mime   3 failed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
}
