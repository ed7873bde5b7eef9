package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// The other roles: events, aliases, cursors, clients and their keys,
// namespaces and link patterns, the model cache, and Stats.

// testClientNamespaces: a client's declared namespaces are stored sorted
// and without repeats, replaced as a whole, validated, and an unknown
// client is not found.
func testClientNamespaces(t *testing.T, s store.Store) {
	must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Acme", Namespaces: []string{"order", "customer", "order"}}))(t)
	if c := must(s.GetClient(ctx(t), "acme"))(t); !slices.Equal(c.Namespaces, []string{"customer", "order"}) {
		t.Fatalf("created with %v", c.Namespaces)
	}
	c := must(s.SetClientNamespaces(ctx(t), "acme", []string{"invoice"}))(t)
	if !slices.Equal(c.Namespaces, []string{"invoice"}) || c.Name != "Acme" {
		t.Fatalf("set: %+v", c)
	}
	if cs := must(s.ListClients(ctx(t)))(t); len(cs) != 1 || !slices.Equal(cs[0].Namespaces, []string{"invoice"}) {
		t.Fatalf("list: %+v", cs)
	}
	if c := must(s.SetClientNamespaces(ctx(t), "acme", nil))(t); c.Namespaces != nil {
		t.Fatalf("cleared: %v", c.Namespaces)
	}
	for _, bad := range [][]string{{"Order"}, {"x"}, {"has space"}, {"1st"}} {
		if _, err := s.SetClientNamespaces(ctx(t), "acme", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("namespaces %q: err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.PutClient(ctx(t), store.Client{ID: "globex", Namespaces: []string{"Bad!"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("put with a bad namespace: %v", err)
	}
	if _, err := s.SetClientNamespaces(ctx(t), "nobody", []string{"order"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}

func testEvents(t *testing.T, s store.Store) {
	var seqs []int64
	before := must(s.LatestEventSeq(ctx(t)))(t)
	for i, c := range []string{"acme", "globex", "acme"} {
		e := must(s.AppendEvent(ctx(t), store.Event{Client: c, Aggregate: "poll", AggregateID: "mail", Type: "poll.finished", Data: json.RawMessage(fmt.Sprintf(`{"fetched":%d}`, i))}))(t)
		if latest := must(s.LatestEventSeq(ctx(t)))(t); latest != e.Seq || latest <= before {
			t.Fatalf("latest event seq %d after appending %d (was %d)", latest, e.Seq, before)
		}
		if e.Seq == 0 || e.At.IsZero() {
			t.Fatalf("append did not set seq/at: %+v", e)
		}
		seqs = append(seqs, e.Seq)
	}
	if !slices.IsSorted(seqs) {
		t.Fatalf("seqs not increasing: %v", seqs)
	}
	acme := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme"}))(t)
	if len(acme) != 2 || string(acme[1].Data) != `{"fetched":2}` {
		t.Fatalf("acme events: %+v", acme)
	}
	after := must(s.ListEvents(ctx(t), store.EventQuery{Client: "acme", AfterSeq: acme[0].Seq}))(t)
	if len(after) != 1 || after[0].Seq != acme[1].Seq {
		t.Fatalf("resume after seq: %+v", after)
	}
	if lim := must(s.ListEvents(ctx(t), store.EventQuery{Limit: 1}))(t); len(lim) != 1 {
		t.Fatalf("limit: %d", len(lim))
	}
	if _, err := s.AppendEvent(ctx(t), store.Event{Client: "acme", Aggregate: "x", Type: "y", Data: json.RawMessage(`{bad`)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad data: %v", err)
	}
}

func testAliases(t *testing.T, s store.Store) {
	if _, err := s.ResolveAlias(ctx(t), "acme", "person:annie"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown alias: %v", err)
	}
	if err := s.RecordAlias(ctx(t), "acme", "person:annie", "person:ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAlias(ctx(t), "globex", "person:annie", "person:anne_smith"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ResolveAlias(ctx(t), "acme", "person:annie"))(t); got != "person:ann" {
		t.Fatalf("acme resolves to %q", got)
	}
	if got := must(s.ResolveAlias(ctx(t), "globex", "person:annie"))(t); got != "person:anne_smith" {
		t.Fatalf("globex resolves to %q", got)
	}
	if _, err := s.ResolveAlias(ctx(t), "initech", "person:annie"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("third client sees an alias: %v", err)
	}
	if err := s.RecordAlias(ctx(t), "acme", "person:annie", "person:ann_lee"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ResolveAlias(ctx(t), "acme", "person:annie"))(t); got != "person:ann_lee" {
		t.Fatalf("re-mapped alias resolves to %q", got)
	}
	// Many at once: the client's own, each once; those with no entry absent.
	must(0, s.RecordAlias(ctx(t), "acme", "person:bob_s", "person:bob"))(t)
	asked := []string{"person:annie", "person:ann_lee", "person:bob_s", "person:annie"}
	for i := range 600 { // more than one query's worth
		asked = append(asked, fmt.Sprint("person:nobody_", i))
	}
	got := must(s.ResolveAliases(ctx(t), "acme", asked))(t)
	if want := map[string]string{"person:annie": "person:ann_lee", "person:bob_s": "person:bob"}; !maps.Equal(got, want) {
		t.Fatalf("ResolveAliases: %v, want %v", got, want)
	}
	if got := must(s.ResolveAliases(ctx(t), "globex", asked[:3]))(t); !maps.Equal(got, map[string]string{"person:annie": "person:anne_smith"}) {
		t.Fatalf("ResolveAliases for globex: %v", got)
	}
	if got := must(s.ResolveAliases(ctx(t), "acme", nil))(t); len(got) != 0 {
		t.Fatalf("ResolveAliases of nothing: %v", got)
	}
}

func testCursors(t *testing.T, s store.Store) {
	if _, err := s.GetCursor(ctx(t), "imap:work/INBOX"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing cursor: %v", err)
	}
	for _, v := range []string{`{"uidvalidity":7,"uid":10}`, `{"uidvalidity":7,"uid":42}`} {
		if err := s.CommitCursor(ctx(t), "imap:work/INBOX", v); err != nil {
			t.Fatal(err)
		}
		if got := must(s.GetCursor(ctx(t), "imap:work/INBOX"))(t); got != v {
			t.Fatalf("cursor = %q, want %q", got, v)
		}
	}
	if _, err := s.GetCursor(ctx(t), "imap:work/Sent"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other cursor leaked: %v", err)
	}
}

func testClients(t *testing.T, s store.Store) {
	if created := must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Acme"}))(t); !created {
		t.Fatal("first put not created")
	}
	if created := must(s.PutClient(ctx(t), store.Client{ID: "acme", Name: "Other"}))(t); created {
		t.Fatal("second put created")
	}
	if c := must(s.GetClient(ctx(t), "acme"))(t); c.Name != "Acme" {
		t.Fatalf("client renamed by idempotent put: %q", c.Name)
	}
	if _, err := s.PutClient(ctx(t), store.Client{ID: "Bad Name/.."}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	must(s.PutClient(ctx(t), store.Client{ID: "globex"}))(t)
	if cs := must(s.ListClients(ctx(t)))(t); len(cs) != 2 || cs[0].ID != "acme" {
		t.Fatalf("list: %+v", cs)
	}
	key := store.APIKey{ID: "k1", Client: "acme", Role: store.RoleClient, Name: "desktop", Hash: store.HashAPIKey("secret-1")}
	if err := s.CreateAPIKey(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx(t), store.APIKey{ID: "k2", Client: "acme", Role: store.RoleClient, Hash: store.HashAPIKey("secret-1")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	if err := s.CreateAPIKey(ctx(t), store.APIKey{ID: "k3", Role: store.RoleAdmin, Hash: "short"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unhashed key: %v", err)
	}
	got := must(s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-1")))(t)
	if got.Client != "acme" || got.Role != store.RoleClient {
		t.Fatalf("lookup: %+v", got)
	}
	if _, err := s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := s.RevokeAPIKey(ctx(t), "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAPIKey(ctx(t), "k1"); err != nil {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, err := s.LookupAPIKey(ctx(t), store.HashAPIKey("secret-1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key still works: %v", err)
	}
	ks := must(s.ListAPIKeys(ctx(t), "acme"))(t)
	if len(ks) != 1 || ks[0].RevokedAt.IsZero() {
		t.Fatalf("list keys: %+v", ks)
	}
	if err := s.RevokeAPIKey(ctx(t), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke missing: %v", err)
	}
}

func testStats(t *testing.T, s store.Store) {
	mustPut(t, s, doc("acme", "1", "a"))
	mustPut(t, s, doc("acme", "2", "b"))
	mustPut(t, s, store.Document{Client: "globex", SourceType: store.SourceJira, ExternalID: "J-1", Raw: []byte("j")})
	must(s.EnqueueTasks(ctx(t), task("acme", "1"), task("globex", "J-1")))(t)
	claimed := must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), "q", 1)))(t)
	st := must(s.Stats(ctx(t)))(t)
	if len(st.ModelUsage) != 0 {
		t.Fatalf("model usage with no model call: %+v", st.ModelUsage)
	}
	// The claimed task finishes having spent two model calls; the other is
	// claimed and spends nothing: totals per kind cover both.
	u := &store.Usage{ModelCalls: 2, PromptTokens: 300, OutputTokens: 40, Iterations: 2}
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: claimed[0].ID, From: store.TaskQualifying, To: store.TaskDone, Owner: "q", Usage: u}}); err != nil {
		t.Fatal(err)
	}
	must(s.ClaimTasks(ctx(t), store.StageQualify, claimAt(time.Now(), "q", 1)))(t)
	st = must(s.Stats(ctx(t)))(t)
	if u := st.ModelUsage["DATA_PROCESSING"]; u != (store.UsageTotals{Tasks: 2, ModelCalls: 2, PromptTokens: 300, OutputTokens: 40}) || u.CallsPerTask() != 1 {
		t.Fatalf("model usage: %+v", st.ModelUsage)
	}
	for _, state := range store.TaskStates {
		if _, ok := st.Tasks[string(state)]; !ok {
			t.Fatalf("stats miss task state %s", state)
		}
	}
	if st.Documents["NEW"] != 3 || st.Documents["INDEXED"] != 0 || st.Tasks["DONE"] != 1 || st.Tasks["QUALIFICATION_IN_PROGRESS"] != 1 {
		t.Fatalf("totals: %+v %+v", st.Documents, st.Tasks)
	}
	if st.DocumentsBySource["JIRA"]["NEW"] != 1 || st.DocumentsByClient["acme"]["NEW"] != 2 || st.TasksByKind["DATA_PROCESSING"]["DONE"] != 1 {
		t.Fatalf("breakdowns: %+v %+v %+v", st.DocumentsBySource, st.DocumentsByClient, st.TasksByKind)
	}
	if oldest := st.OldestWaiting["documents.NEW"]; oldest.IsZero() || time.Since(oldest) > time.Minute || len(st.OldestWaiting) != 1 {
		t.Fatalf("oldest waiting: %v", st.OldestWaiting)
	}
	backlogAsStats(t, s, st, false)
	// A quarantined document and a failed task count by their error class.
	d := must(s.ClaimDocuments(ctx(t), claimAt(time.Now(), "ix", 1)))(t)[0]
	bad := &store.ErrorInfo{Class: "bad_mime", Message: "no boundary"}
	if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: d.ID, From: store.DocIndexing, To: store.DocQuarantined, Owner: "ix", Error: bad}}); err != nil {
		t.Fatal(err)
	}
	running := must(s.ListTasks(ctx(t), store.TaskQuery{State: store.TaskQualifying}))(t)[0]
	if err := s.TransitionTasks(ctx(t), []store.TaskTransition{{ID: running.ID, From: store.TaskQualifying, To: store.TaskFailed, Owner: "q", Error: &store.ErrorInfo{Class: "bad_content"}}}); err != nil {
		t.Fatal(err)
	}
	st = must(s.Stats(ctx(t)))(t)
	if st.Failures["documents.bad_mime"] != 1 || st.Failures["tasks.bad_content"] != 1 || len(st.Failures) != 2 {
		t.Fatalf("failures: %v", st.Failures)
	}
	backlogAsStats(t, s, st, false)
	// Every document indexed and no task waiting: nothing left.
	for _, d := range must(s.ClaimDocuments(ctx(t), claimAt(time.Now(), "ix", 10)))(t) {
		if err := s.TransitionDocuments(ctx(t), []store.DocumentTransition{{ID: d.ID, From: store.DocIndexing, To: store.DocIndexed, Owner: "ix"}}); err != nil {
			t.Fatal(err)
		}
	}
	backlogAsStats(t, s, must(s.Stats(ctx(t)))(t), true)
}

// backlogAsStats checks that Backlog counts what Stats counts in the
// backlog's states, and whether it is empty.
func backlogAsStats(t *testing.T, s store.Store, st store.Stats, empty bool) {
	t.Helper()
	b := must(s.Backlog(ctx(t)))(t)
	for _, state := range store.BacklogDocumentStates {
		if b.Documents[string(state)] != st.Documents[string(state)] {
			t.Fatalf("backlog documents %v, stats %v", b.Documents, st.Documents)
		}
	}
	for _, state := range store.BacklogTaskStates {
		if b.Tasks[string(state)] != st.Tasks[string(state)] {
			t.Fatalf("backlog tasks %v, stats %v", b.Tasks, st.Tasks)
		}
	}
	if len(b.Documents) > len(store.BacklogDocumentStates) || len(b.Tasks) > len(store.BacklogTaskStates) || b.Empty() != empty {
		t.Fatalf("backlog %+v, empty %t; want empty %t", b, b.Empty(), empty)
	}
}

func testLinkPatterns(t *testing.T, s store.Store) {
	for _, p := range []store.LinkPattern{
		{Client: "acme", Kind: store.LinkAllow, Pattern: "Wiki.Acme.test"},
		{Client: "acme", Kind: store.LinkBlock, Pattern: "https://evil.test/"},
		{Client: "acme", Kind: store.LinkAllow, Pattern: "wiki.acme.test"}, // again
		{Client: "globex", Kind: store.LinkAllow, Pattern: "globex.test"},
	} {
		if err := s.AddLinkPattern(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	got := must(s.ListLinkPatterns(ctx(t), "acme"))(t)
	if len(got) != 2 || got[0].Kind != store.LinkAllow || got[0].Pattern != "wiki.acme.test" || got[1].Pattern != "https://evil.test/" {
		t.Fatalf("acme patterns: %+v", got)
	}
	if err := s.RemoveLinkPattern(ctx(t), "acme", store.LinkAllow, "WIKI.acme.test"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ListLinkPatterns(ctx(t), "acme"))(t); len(got) != 1 {
		t.Fatalf("after remove: %+v", got)
	}
	if got := must(s.ListLinkPatterns(ctx(t), "globex"))(t); len(got) != 1 {
		t.Fatalf("globex: %+v", got)
	}
	for _, bad := range []store.LinkPattern{{Client: "acme", Kind: "maybe", Pattern: "x"}, {Client: "acme", Kind: store.LinkAllow, Pattern: " "}, {Client: "Bad!", Kind: store.LinkAllow, Pattern: "x"}} {
		if err := s.AddLinkPattern(ctx(t), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func testModelCache(t *testing.T, s store.Store) {
	if _, err := s.GetModelAnswer(ctx(t), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	for _, v := range []string{`[{"name":"routeTask"}]`, `[]`} {
		if err := s.PutModelAnswer(ctx(t), "k", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got := must(s.GetModelAnswer(ctx(t), "k"))(t); string(got) != v {
			t.Fatalf("got %s, want %s", got, v)
		}
	}
}

func testEncoders(t *testing.T, s store.Store) {
	if _, err := s.GetEncoder(ctx(t), "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("none yet: %v", err)
	}
	if name := must(s.EncoderName(ctx(t), "acme"))(t); name != "" {
		t.Fatalf("none yet, named %q", name)
	}
	model := bytes.Repeat([]byte{0, 1, 0xff, 'x'}, 1<<18) // 1 MiB, every byte value kept
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for i, e := range []store.Encoder{
		{Client: "acme", Name: "corpus-1", Model: model, Items: 7171, TrainedAt: at},
		{Client: "acme", Name: "corpus-2", Model: []byte("two"), Items: 8000, TrainedAt: at.Add(time.Hour), ReplayPending: true, Documents: 9001},
	} {
		if err := s.PutEncoder(ctx(t), e); err != nil {
			t.Fatal(err)
		}
		got := must(s.GetEncoder(ctx(t), "acme"))(t)
		if got.Name != e.Name || !bytes.Equal(got.Model, e.Model) || got.Items != e.Items || !got.TrainedAt.Equal(e.TrainedAt) || got.ReplayPending != e.ReplayPending || got.Documents != e.Documents {
			t.Fatalf("put %d: got %s (%d bytes, %d items, %v, replay pending %t, %d documents)", i, got.Name, len(got.Model), got.Items, got.TrainedAt, got.ReplayPending, got.Documents)
		}
		if name := must(s.EncoderName(ctx(t), "acme"))(t); name != e.Name {
			t.Fatalf("put %d: named %q", i, name)
		}
	}
	if _, err := s.GetEncoder(ctx(t), "globex"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another client's: %v", err)
	}

	// The list: every client's, by client, without the models.
	if err := s.PutEncoder(ctx(t), store.Encoder{Client: "globex", Name: "corpus-g", Model: []byte("g"), Items: 1200, TrainedAt: at}); err != nil {
		t.Fatal(err)
	}
	list := must(s.ListEncoders(ctx(t)))(t)
	if len(list) != 2 || list[0].Client != "acme" || list[0].Name != "corpus-2" || !list[0].ReplayPending || list[0].Items != 8000 || list[0].Documents != 9001 || !list[0].TrainedAt.Equal(at.Add(time.Hour)) ||
		list[1].Client != "globex" || list[1].ReplayPending || list[0].Model != nil || list[1].Model != nil {
		t.Fatalf("list: %+v", list)
	}

	// A finished replay clears the mark of the encoder it was made with,
	// not of one stored since.
	if err := s.EncoderReplayed(ctx(t), "acme", "corpus-1"); err != nil {
		t.Fatal(err)
	}
	if !must(s.GetEncoder(ctx(t), "acme"))(t).ReplayPending {
		t.Fatal("an older encoder's replay cleared the newer one's mark")
	}
	if err := s.EncoderReplayed(ctx(t), "acme", "corpus-2"); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetEncoder(ctx(t), "acme"))(t); got.ReplayPending || got.Name != "corpus-2" || !bytes.Equal(got.Model, []byte("two")) {
		t.Fatalf("after its replay: %s, replay pending %t", got.Name, got.ReplayPending)
	}
	if err := s.EncoderReplayed(ctx(t), "initech", "corpus-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a client with none: %v", err)
	}
	for _, bad := range []store.Encoder{{Client: "Bad!", Name: "x", Model: []byte("x")}, {Client: "acme", Model: []byte("x")}, {Client: "acme", Name: "x"}} {
		if err := s.PutEncoder(ctx(t), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
