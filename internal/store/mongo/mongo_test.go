package mongo_test

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
	"github.com/jervis-dev/jervis/internal/store/storetest"
)

const how = "export TEST_MONGO_URI=$(deploy/ferretdb.sh start), or point it at a MongoDB server"

// open returns a store on a database of its own, named from the test and
// dropped after it.
func open(t *testing.T) *mongo.Store {
	t.Helper()
	uri := integration.Env(t, "TEST_MONGO_URI", how)
	// A decimal name: FerretDB v1.24 panics on some hexadecimal ones
	// ("jervis_test_75588eeef89f988b").
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	name := "jervis_test_" + strconv.FormatUint(h.Sum64(), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mongo.Open(ctx, mongo.Options{URI: uri, Database: name, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx); err != nil { // left over from an interrupted run
		t.Fatal(err)
	}
	if s, err = mongo.Open(ctx, mongo.Options{URI: uri, Database: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Drop(context.Background())
		_ = s.Close()
	})
	return s
}

func TestConformance(t *testing.T) {
	s := open(t)
	server, err := s.ServerVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	caps := storetest.All
	if strings.HasPrefix(server, "FerretDB") {
		// FerretDB v1 applies an update as a read, then a write: racing
		// compare-and-sets can both win there, never on MongoDB.
		caps.AtomicUpdates = false
	}
	t.Logf("server: %s; capabilities %+v", server, caps)
	storetest.ExerciseCaps(t, func(t *testing.T) store.Store { return open(t) }, caps)
}

// TestLargeDocument: a payload larger than a MongoDB document may be (16
// MiB) is stored through GridFS and read back whole.
func TestLargeDocument(t *testing.T) {
	s := open(t)
	raw := bytes.Repeat([]byte("attachment bytes "), 2<<20) // 34 MB
	d, created, err := s.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "<big@x>", Raw: raw,
		Normalized: store.Normalized{Title: "big", Body: "see attachment"}})
	if err != nil || !created {
		t.Fatalf("put: created=%v err=%v", created, err)
	}
	got, err := s.GetDocument(t.Context(), "acme", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Raw, raw) || got.Normalized.Title != "big" {
		t.Fatalf("read back %d bytes, title %q", len(got.Raw), got.Normalized.Title)
	}
	if _, created, err := s.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "<big@x>", Raw: raw}); err != nil || created {
		t.Fatalf("second put: created=%v err=%v", created, err)
	}
	list, err := s.ListDocuments(t.Context(), store.DocumentQuery{Client: "acme"})
	if err != nil || len(list) != 1 || list[0].Normalized.Body != "see attachment" || list[0].Raw != nil {
		t.Fatalf("list: %+v err=%v", list, err)
	}
	claimed, err := s.ClaimDocuments(t.Context(), store.Claim{Owner: "w", Limit: 5, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
	if err != nil || len(claimed) != 1 || len(claimed[0].Raw) != len(raw) || claimed[0].Normalized.Title != "big" {
		t.Fatalf("claim: %d err=%v", len(claimed), err)
	}
}

// TestWatchInserts: on a replica set a document stored by anyone wakes the
// watcher; where the server has no change streams the watcher says so at
// once (workers then poll).
func TestWatchInserts(t *testing.T) {
	s := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	docs, tasks := make(chan struct{}, 10), make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchInserts(ctx, func() { docs <- struct{}{} }, func() { tasks <- struct{}{} })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, mongo.ErrNoChangeStreams) {
			t.Fatalf("watch ended: %v", err)
		}
		server, _ := s.ServerVersion(t.Context())
		t.Logf("%s: %v", server, err)
		return
	case <-time.After(time.Second): // watching
	}
	d, _, err := s.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceEmail, ExternalID: "<w@x>", Raw: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueTasks(t.Context(), store.Task{Client: "acme", Kind: store.KindData, SourceDoc: d.ID}); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan struct{}{"document": docs, "task": tasks} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up for the %s inserted", name)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch after cancel: %v", err)
	}
}
