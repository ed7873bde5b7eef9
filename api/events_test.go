package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/store"
)

// sse opens an event stream and sends its events, parsed, on a channel.
func sse(t *testing.T, url, key, lastID string) <-chan store.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan store.Event, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var id string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var e store.Event
				if json.Unmarshal([]byte(v), &e) != nil || strconv.FormatInt(e.Seq, 10) != id {
					t.Errorf("event %q with id %s", v, id)
					return
				}
				out <- e
			}
		}
	}()
	return out
}

func next(t *testing.T, events <-chan store.Event) (store.Event, bool) {
	t.Helper()
	select {
	case e, ok := <-events:
		return e, ok
	case <-time.After(300 * time.Millisecond):
		return store.Event{}, false
	}
}

func TestEventStreamIsTheClientsAndResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *api.Config) { c.EventPoll = 20 * time.Millisecond })
	stream := sse(t, f.url+"/api/v1/events", f.acme.key, "")
	var last store.Event
	n := 0
	for e, ok := next(t, stream); ok; e, ok = next(t, stream) {
		if e.Client != "acme" {
			t.Fatalf("acme's stream carries %s's event %+v", e.Client, e)
		}
		last, n = e, n+1
	}
	if n < 2 { // the document stored, the task enqueued
		t.Fatalf("%d events in acme's backlog", n)
	}
	// Live: a new document for each client; acme's stream shows acme's only.
	for _, c := range []string{"globex", "acme"} {
		if _, _, err := f.st.PutDocument(t.Context(), store.Document{Client: c, SourceType: store.SourceFile, ExternalID: "live", Raw: []byte("live " + c)}); err != nil {
			t.Fatal(err)
		}
	}
	live, ok := next(t, stream)
	if !ok || live.Client != "acme" || live.Seq <= last.Seq {
		t.Fatalf("live event %+v %v after %d", live, ok, last.Seq)
	}
	// Reconnecting with Last-Event-ID resumes after it: only the live event.
	resumed := sse(t, f.url+"/api/v1/events", f.acme.key, strconv.FormatInt(last.Seq, 10))
	if e, ok := next(t, resumed); !ok || e.Seq != live.Seq {
		t.Fatalf("resumed with %+v %v, want seq %d", e, ok, live.Seq)
	}
	if e, ok := next(t, resumed); ok {
		t.Fatalf("resumed stream repeats %+v", e)
	}
	// ?after=now: no backlog, only what happens next.
	fromNow := sse(t, f.url+"/api/v1/events?after=now", f.acme.key, "")
	if e, ok := next(t, fromNow); ok {
		t.Fatalf("a stream from now replays %+v", e)
	}
	if _, _, err := f.st.PutDocument(t.Context(), store.Document{Client: "acme", SourceType: store.SourceFile, ExternalID: "later", Raw: []byte("later")}); err != nil {
		t.Fatal(err)
	}
	if e, ok := next(t, fromNow); !ok || e.Seq <= live.Seq || e.Client != "acme" {
		t.Fatalf("from now: %+v %v", e, ok)
	}
	// The admin stream carries every client's events; a client key is
	// refused.
	all := sse(t, f.url+"/admin/v1/events?after=now", f.admin, "")
	for _, c := range []string{"globex", "acme"} {
		if _, _, err := f.st.PutDocument(t.Context(), store.Document{Client: c, SourceType: store.SourceFile, ExternalID: "admin-" + c, Raw: []byte("admin " + c)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for e, ok := next(t, all); ok; e, ok = next(t, all) {
		seen[e.Client] = true
	}
	if !seen["acme"] || !seen["globex"] {
		t.Fatalf("the admin stream saw %v", seen)
	}
	if code, _ := call(t, "GET", f.url+"/admin/v1/events", f.acme.key, ""); code != http.StatusForbidden {
		t.Fatalf("a client key on the admin stream: %d", code)
	}
	if code, body := call(t, "GET", f.url+"/api/v1/events?after=x", f.acme.key, ""); code != http.StatusBadRequest {
		t.Fatalf("bad resume id: %d %v", code, body)
	}
}
