package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// events streams the client's pipeline events as Server-Sent Events: one
// event per log entry, its Seq as the SSE id, so a client that reconnects
// with Last-Event-ID (or ?after=SEQ) resumes where it stopped. The store is
// polled; a comment line every KeepAlive keeps proxies from closing an idle
// stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r.Context())
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	var seq int64
	if after != "" {
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
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	poll := time.NewTicker(s.cfg.EventPoll)
	defer poll.Stop()
	idle := time.Now()
	for {
		evs, err := s.cfg.Store.ListEvents(r.Context(), store.EventQuery{Client: p.Client, AfterSeq: seq, Limit: 500})
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Error("event stream", "client", p.Client, "err", err)
			}
			return
		}
		for _, e := range evs {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b)
			seq = e.Seq
		}
		if len(evs) > 0 {
			flusher.Flush()
			idle = time.Now()
			if len(evs) == 500 {
				continue // more are waiting
			}
		} else if time.Since(idle) >= s.cfg.KeepAlive {
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
			idle = time.Now()
		}
		select {
		case <-r.Context().Done():
			return
		case <-poll.C:
		}
	}
}
