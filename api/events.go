package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// events streams the client's pipeline events as Server-Sent Events: one
// event per log entry, its Seq as the SSE id, so a client that reconnects
// with Last-Event-ID (or ?after=SEQ) resumes where it stopped; ?after=now
// starts with what happens next. The store is
// polled; a comment line every KeepAlive keeps proxies from closing an idle
// stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r.Context())
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	var seq int64
	fromNow := after == "now"
	if after != "" && !fromNow {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			writeError(w, invalid("Last-Event-ID", "must be the id of an event"))
			return
		}
		seq = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, toError(fmt.Errorf("response writer %T cannot stream", w), s.log, r))
		return
	}
	// "now" is fixed before the answer's headers go: a client that waits
	// for them and then reads a list misses no event in between.
	watch, done := s.eventWatch(r.Context())
	defer done()
	if fromNow { // only what happens from now on (a live view)
		seq, _ = watch.now()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	keepAlive := time.NewTimer(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		latest, changed := watch.now()
		if latest > seq {
			evs, err := s.cfg.Store.ListEvents(r.Context(), store.EventQuery{Client: p.Client, AfterSeq: seq, Limit: 500})
			if err != nil {
				if r.Context().Err() == nil {
					s.log.Error("event stream", "client", p.Client, "err", err)
				}
				return
			}
			for _, e := range evs {
				b, _ := json.Marshal(s.clientEvent(e))
				fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b)
				seq = e.Seq
			}
			if len(evs) > 0 {
				flusher.Flush()
				keepAlive.Reset(s.cfg.KeepAlive)
			}
			if len(evs) == 500 {
				continue // more are waiting
			}
			// The rest were other clients' events: nothing more to read
			// until the log moves again.
			seq = max(seq, latest)
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
			keepAlive.Reset(s.cfg.KeepAlive)
		}
	}
}

// eventWatcher follows the event log's latest Seq for every stream of this
// server: one store query per EventPoll in all, instead of one per stream;
// a stream reads its client's events only when the log has moved. It runs
// while at least one stream is open.
type eventWatcher struct {
	mu      sync.Mutex
	latest  int64
	changed chan struct{} // closed, and replaced, when latest moves
	streams int
	stop    context.CancelFunc
}

// now returns the latest Seq seen and a channel closed when it moves.
func (w *eventWatcher) now() (int64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest, w.changed
}

// eventWatch registers a stream with the server's watcher, starting it for
// the first; call the returned function when the stream ends.
func (s *Server) eventWatch(ctx context.Context) (*eventWatcher, func()) {
	w := &s.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streams++
	if w.streams == 1 {
		seq, err := s.cfg.Store.LatestEventSeq(ctx)
		if err != nil {
			s.log.Error("event log", "err", err)
		}
		w.latest = max(w.latest, seq)
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		wctx, stop := context.WithCancel(s.cfg.BaseContext)
		w.stop = stop
		go s.followEvents(wctx, w)
	}
	return w, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.streams--; w.streams == 0 {
			w.stop()
		}
	}
}

func (s *Server) followEvents(ctx context.Context, w *eventWatcher) {
	tick := time.NewTicker(s.cfg.EventPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		seq, err := s.cfg.Store.LatestEventSeq(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("event log", "err", err)
			}
			continue
		}
		w.mu.Lock()
		if seq > w.latest {
			w.latest = seq
			close(w.changed)
			w.changed = make(chan struct{})
		}
		w.mu.Unlock()
	}
}
