package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/sqlite"
)

// A process killed (kill -9) once it has trained a client's encoder, as it
// replays the client's documents with it, loses nothing: the next one
// replays them again (the encoder's replay is pending until a replay has
// finished), every document ends indexed, and the encoder is not trained
// twice.
func TestEncoderScheduleSurvivesAKill(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(data, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	var docs []store.Document
	for i := range n {
		tp := i / 10
		title := fmt.Sprintf("t%dw%d t%dw%d crash", tp, i%7, tp, (i+3)%7)
		var body []string
		for j := range 20 {
			body = append(body, fmt.Sprintf("b%dw%d", tp, (i+j)%13), fmt.Sprintf("shared%d", (i*7+j)%40))
		}
		docs = append(docs, store.Document{Client: "acme", SourceType: store.SourceJira, ExternalID: fmt.Sprintf("T-%d", i), Raw: []byte(title),
			Normalized: store.Normalized{Title: title, Body: strings.Join(body, " ")}})
	}
	if _, err := s.PutDocuments(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	env := []string{"JERVIS_EMBEDDER_CLIENT_ENCODER_MIN_DOCUMENTS=1000", "JERVIS_EMBEDDER_CLIENT_ENCODER_EVERY=100ms"}
	serve := func() (func(), <-chan map[string]any) {
		cmd := jervis(t, "serve", "--data", data, "--listen", "127.0.0.1:0", "--roles", "indexers,qualifier,api", "--log-format", "json")
		cmd.Env = append(cmd.Env, env...)
		lines := jsonLogs(t, cmd)
		return func() { cmd.Process.Kill(); cmd.Wait() }, lines
	}

	kill, lines := serve()
	trained := waitLog(t, lines, "encoder trained")
	kill() // the replay has begun, or is about to
	if trained["reason"] != "first" || trained["client"] != "acme" {
		t.Fatalf("trained: %v", trained)
	}
	s, err = sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(data, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	enc, err := s.GetEncoder(t.Context(), "acme")
	if err != nil || enc.Name != trained["encoder"] || !enc.ReplayPending {
		t.Fatalf("after the kill: %s, replay pending %t (%v); want %v, pending", enc.Name, enc.ReplayPending, err, trained["encoder"])
	}
	encoderRow := func(want string) {
		t.Helper()
		code, out, errOut := runCLI(t, nil, "status", "--data", data)
		if code != 0 || !regexp.MustCompile(`(?m)^`+enc.Name+`\s+acme\s+\S+\s+1500\s+1500\s+`+want+`\s+ok$`).MatchString(out) {
			t.Fatalf("jervis status, the encoder's replay %s: %d\n%s%s", want, code, out, errOut)
		}
	}
	encoderRow("pending")

	stop, lines := serve()
	defer stop()
	done := waitLog(t, lines, "encoder job done")
	if done["reason"] != "replay pending" || done["encoder"] != enc.Name {
		t.Fatalf("after the restart: %v", done)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := s.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Documents["INDEXED"] == n && st.Tasks["NEW"]+st.Tasks["QUALIFICATION_IN_PROGRESS"]+st.Tasks["RETRY"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained: %v %v", st.Documents, st.Tasks)
		}
	}
	after, err := s.GetEncoder(t.Context(), "acme")
	if err != nil || after.Name != enc.Name || after.ReplayPending || !after.TrainedAt.Equal(enc.TrainedAt) {
		t.Fatalf("the encoder after the replay: %s trained %v, replay pending %t (%v)", after.Name, after.TrainedAt, after.ReplayPending, err)
	}
	stop()
	encoderRow("done")
	// Searchable: the replayed documents' chunks are back.
	code, out, errOut := runCLI(t, nil, "search", "--data", data, "--client", "acme", "t3w1 crash")
	if code != 0 || !strings.Contains(out, "T-3") {
		t.Fatalf("search after the replay: %d\n%s%s", code, out, errOut)
	}
}

// jervis status says when a client's stored encoder cannot be read, and
// why, without a server.
func TestStatusSaysAnEncoderIsUnreadable(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(data, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutEncoder(t.Context(), store.Encoder{Client: "acme", Name: "corpus-0123456789ab", Model: []byte("JVCE\x09 of a later format"), Items: 150, TrainedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out, errOut := runCLI(t, nil, "status", "--data", data)
	if code != 0 || !regexp.MustCompile(`(?m)^corpus-0123456789ab\s+acme\s.*\sdone\s+UNREADABLE \(the default embedder is used\): .*newer jervis`).MatchString(out) {
		t.Fatalf("jervis status with an unreadable encoder: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, "status", "--data", data, "--json")
	if code != 0 || !strings.Contains(out, `"unreadable": "not an encoder model: format 9, written by a newer jervis`) {
		t.Fatalf("jervis status --json with an unreadable encoder: %d\n%s%s", code, out, errOut)
	}
}
