package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/internal/store"
)

func TestAdminManagesClientsKeysAndLinkPatterns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if code, body := call(t, "POST", f.url+"/admin/v1/clients", f.admin, `{"id":"initech","name":"Initech"}`); code != http.StatusCreated || body["id"] != "initech" {
		t.Fatalf("create client: %d %v", code, body)
	}
	if code, body := call(t, "POST", f.url+"/admin/v1/clients", f.admin, `{"id":"initech"}`); code != http.StatusConflict {
		t.Fatalf("create again: %d %v", code, body)
	}
	if _, body := call(t, "GET", f.url+"/admin/v1/clients", f.admin, ""); len(body["items"].([]any)) != 3 {
		t.Fatalf("clients: %v", body)
	}
	code, created := call(t, "POST", f.url+"/admin/v1/clients/initech/keys", f.admin, `{"name":"desktop app"}`)
	secret, _ := created["secret"].(string)
	if code != http.StatusCreated || len(secret) < 40 || created["client"] != "initech" {
		t.Fatalf("create key: %d %v", code, created)
	}
	if code, body := call(t, "GET", f.url+"/api/v1/documents", secret, ""); code != http.StatusOK || len(body["items"].([]any)) != 0 {
		t.Fatalf("new client's key: %d %v", code, body)
	}
	_, keys := call(t, "GET", f.url+"/admin/v1/clients/initech/keys", f.admin, "")
	if items := keys["items"].([]any); len(items) != 1 || items[0].(map[string]any)["secret"] != nil || items[0].(map[string]any)["hash"] != nil {
		t.Fatalf("keys list must show neither secret nor hash: %v", keys)
	}
	if code, _ := call(t, "POST", f.url+"/admin/v1/keys/"+created["id"].(string)+"/revoke", f.admin, ""); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code, _ := call(t, "GET", f.url+"/api/v1/documents", secret, ""); code != http.StatusUnauthorized {
		t.Fatalf("revoked key still works: %d", code)
	}
	if code, _ := call(t, "GET", f.url+"/admin/v1/clients/nobody/keys", f.admin, ""); code != http.StatusNotFound {
		t.Fatalf("keys of an unknown client: %d", code)
	}

	if code, body := call(t, "POST", f.url+"/admin/v1/clients/acme/link-patterns", f.admin, `{"kind":"allow","pattern":"Wiki.Acme.test"}`); code != http.StatusCreated {
		t.Fatalf("add pattern: %d %v", code, body)
	}
	if _, body := call(t, "GET", f.url+"/admin/v1/clients/acme/link-patterns", f.admin, ""); len(body["items"].([]any)) != 1 {
		t.Fatalf("patterns: %v", body)
	}
	for _, bad := range []string{`ftp://files.acme.test`, `https://user:pw-secret-1@acme.test`, `acme.test/path`, `a b.test`} {
		code, body := call(t, "POST", f.url+"/admin/v1/clients/acme/link-patterns", f.admin, `{"kind":"block","pattern":"`+bad+`"}`)
		if code != http.StatusBadRequest || strings.Contains(fmt.Sprint(body), "pw-secret-1") {
			t.Errorf("pattern %q: %d %v", bad, code, body)
		}
	}
	if _, body := call(t, "GET", f.url+"/admin/v1/clients/globex/link-patterns", f.admin, ""); len(body["items"].([]any)) != 0 {
		t.Fatalf("globex sees acme's patterns: %v", body)
	}
	if code, _ := call(t, "DELETE", f.url+"/admin/v1/clients/acme/link-patterns", f.admin, `{"kind":"allow","pattern":"wiki.acme.test"}`); code != http.StatusNoContent {
		t.Fatalf("remove pattern: %d", code)
	}
	if _, body := call(t, "GET", f.url+"/admin/v1/clients/acme/link-patterns", f.admin, ""); len(body["items"].([]any)) != 0 {
		t.Fatalf("after remove: %v", body)
	}

	if code, body := call(t, "GET", f.url+"/admin/v1/stats", f.admin, ""); code != http.StatusOK || body["tasks"].(map[string]any)["NEW"] != 2.0 {
		t.Fatalf("stats: %d %v", code, body)
	}
}

func TestAdminKeyBootstrap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	// An admin key exists (the fixture made one): nothing new is generated.
	if again, err := api.EnsureAdminKey(ctx, f.st, ""); err != nil || again != "" {
		t.Fatalf("second start generated %q %v", again, err)
	}
	// JERVIS_ADMIN_KEY becomes a working admin key, once.
	env := "jvk_operator-chosen-admin-secret"
	for range 2 {
		if _, err := api.EnsureAdminKey(ctx, f.st, env); err != nil {
			t.Fatal(err)
		}
	}
	if code, _ := call(t, "GET", f.url+"/admin/v1/stats", env, ""); code != http.StatusOK {
		t.Fatalf("JERVIS_ADMIN_KEY: %d", code)
	}
	if _, err := api.EnsureAdminKey(ctx, f.st, "short"); err == nil {
		t.Fatal("a short JERVIS_ADMIN_KEY must be refused")
	}
	admins, _ := f.st.ListAPIKeys(ctx, "")
	if len(admins) != 2 || admins[0].Role != store.RoleAdmin {
		t.Fatalf("admin keys: %+v", admins)
	}
}

func TestAdminRetriesAndCancelsTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	act := func(action, id, body string) (int, map[string]any) {
		return call(t, "POST", f.url+"/admin/v1/tasks/"+id+"/"+action, f.admin, body)
	}
	if code, task := act("cancel", f.acme.task, `{"client":"acme","reason":"duplicate"}`); code != http.StatusOK || task["state"] != "CANCELLED" {
		t.Fatalf("cancel: %d %v", code, task)
	}
	if code, body := act("cancel", f.acme.task, `{"client":"acme"}`); code != http.StatusConflict {
		t.Fatalf("cancel twice: %d %v", code, body)
	}
	if code, task := act("retry", f.acme.task, `{"client":"acme"}`); code != http.StatusOK || task["state"] != "NEW" || task["attempts"] != 0.0 {
		t.Fatalf("retry: %d %v", code, task)
	}
	_, view := call(t, "GET", f.url+"/api/v1/tasks/"+f.acme.task, f.acme.key, "")
	if evs := view["events"].([]any); len(evs) < 3 {
		t.Fatalf("the admin's actions are not in the task's events: %v", evs)
	}
	if code, _ := act("retry", f.acme.task, `{"client":"globex"}`); code != http.StatusNotFound {
		t.Fatalf("another client's task: %d", code)
	}
	if code, body := act("retry", f.acme.task, `{}`); code != http.StatusBadRequest {
		t.Fatalf("no client: %d %v", code, body)
	}
}

// waitJob waits for job id to end and returns it.
func (f fixture) waitJob(t *testing.T, id string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, job := call(t, "GET", f.url+"/admin/v1/jobs/"+id, f.admin, "")
		if code != http.StatusOK {
			t.Fatalf("job %s: %d %v", id, code, job)
		}
		if job["state"] != api.JobRunning {
			return job
		}
	}
	t.Fatalf("job %s still running", id)
	return nil
}

func TestEncoderJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	// Too few documents: the job fails, and says why.
	code, job := call(t, "POST", f.url+"/admin/v1/clients/acme/encoder", f.admin, "")
	if code != http.StatusAccepted {
		t.Fatalf("start: %d %v", code, job)
	}
	if done := f.waitJob(t, job["id"].(string)); done["state"] != api.JobFailed || !strings.Contains(done["error"].(string), "too few") {
		t.Fatalf("a client of one document: %v", done)
	}
	// 150 more: issues of 15 topics, each topic its own words.
	docs := topicDocs("acme", 0, 150)
	if _, err := f.st.PutDocuments(ctx, docs); err != nil {
		t.Fatal(err)
	}
	code, job = call(t, "POST", f.url+"/admin/v1/clients/acme/encoder", f.admin, `{"replay":true}`)
	if code != http.StatusAccepted || job["kind"] != "encoder" {
		t.Fatalf("start: %d %v", code, job)
	}
	if code, body := call(t, "POST", f.url+"/admin/v1/clients/acme/encoder", f.admin, ""); code != http.StatusConflict {
		t.Errorf("a second job while the first trains: %d %v", code, body) // training 151 documents takes far longer than a request
	}
	done := f.waitJob(t, job["id"].(string))
	enc, _ := done["encoder"].(map[string]any)
	trained, _ := enc["trained"].(map[string]any)
	p := done["progress"].(map[string]any)
	if done["state"] != api.JobDone || enc["epoch"] != enc["epochs"] || trained["items"] != 151.0 || p["selected"] != 151.0 || p["wiped"] != false {
		t.Fatalf("trained and replayed: %v", done)
	}
	// Replayed without a wipe: what the client's knowledge base had is
	// still there while the documents are indexed again.
	if code, _ := call(t, "GET", f.url+"/api/v1/nodes/"+url.PathEscape(f.acme.node), f.acme.key, ""); code != http.StatusOK {
		t.Fatalf("acme's node after its encoder's replay: %d", code)
	}
	for client, want := range map[string]string{"acme": trained["name"].(string), "globex": ""} {
		if name, err := f.st.EncoderName(ctx, client); err != nil || name != want {
			t.Errorf("%s's encoder %q (%v), want %q", client, name, err, want)
		}
	}
	_, list := call(t, "GET", f.url+"/admin/v1/clients", f.admin, "")
	for _, c := range list["items"].([]any) {
		c := c.(map[string]any)
		if want := map[string]any{"acme": trained["name"], "globex": nil}[c["id"].(string)]; c["encoder"] != want {
			t.Errorf("client %s listed with encoder %v, want %v", c["id"], c["encoder"], want)
		}
	}
	if code, _ := call(t, "POST", f.url+"/admin/v1/clients/acme/encoder", f.acme.key, ""); code != http.StatusForbidden {
		t.Errorf("a client's key trains: %d", code)
	}
}

// topicDocs are n issues of client, numbered from first, in topics of
// ten whose titles and bodies have their own words.
func topicDocs(client string, first, n int) []store.Document {
	var docs []store.Document
	for i := first; i < first+n; i++ {
		tp := i / 10
		title := fmt.Sprintf("t%dw%d t%dw%d failure", tp, i%7, tp, (i+3)%7)
		var body []string
		for j := range 20 {
			body = append(body, fmt.Sprintf("b%dw%d", tp, (i+j)%13), fmt.Sprintf("shared%d", (i*7+j)%40))
		}
		docs = append(docs, store.Document{Client: client, SourceType: store.SourceJira, ExternalID: fmt.Sprintf("T-%d", i), Raw: []byte(title),
			Normalized: store.Normalized{Title: title, Body: strings.Join(body, " ")}})
	}
	return docs
}

// indexAll moves every document waiting for an indexer to INDEXED, as an
// indexer that made no tasks would.
func indexAll(t *testing.T, st store.Store) {
	t.Helper()
	ctx := t.Context()
	for {
		ds, err := st.ClaimDocuments(ctx, store.Claim{Owner: "test", Limit: 500, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
		var ts []store.DocumentTransition
		for _, d := range ds {
			ts = append(ts, store.DocumentTransition{ID: d.ID, From: store.DocIndexing, To: store.DocIndexed, Owner: "test"})
		}
		if err := st.TransitionDocuments(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
}

// The encoder schedule trains a client's encoder by itself once the client
// has enough documents and has taken them in, again when they have grown,
// replays an encoder's documents again when its replay did not finish, and
// does not try a failed training again at each look.
func TestEncoderSchedule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, c := range []string{"umbrella", "initech"} {
		if _, err := f.st.PutClient(ctx, store.Client{ID: c, Name: c}); err != nil {
			t.Fatal(err)
		}
	}
	jobsOf := func(client string) []map[string]any {
		code, list := call(t, "GET", f.url+"/admin/v1/jobs", f.admin, "")
		if code != http.StatusOK {
			t.Fatalf("jobs: %d %v", code, list)
		}
		var out []map[string]any
		for _, j := range list["items"].([]any) {
			if j := j.(map[string]any); j["request"].(map[string]any)["client"] == client {
				out = append(out, j)
			}
		}
		return out
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) { // within the admin key's rate
			if time.Now().After(deadline) {
				_, all := call(t, "GET", f.url+"/admin/v1/jobs", f.admin, "")
				encs, err := f.st.ListEncoders(ctx)
				t.Fatalf("waiting for %s; the jobs: %v; the encoders: %+v (%v)", what, all["items"], encs, err)
			}
		}
	}
	// 150 documents of umbrella, 120 of initech without a title or body
	// to train on, none of them indexed yet.
	bare := topicDocs("initech", 0, 120)
	for i := range bare {
		bare[i].Normalized = store.Normalized{Body: "x"}
	}
	if _, err := f.st.PutDocuments(ctx, append(topicDocs("umbrella", 0, 150), bare...)); err != nil {
		t.Fatal(err)
	}
	go f.server.RunEncoderSchedule(ctx, api.EncoderSchedule{MinDocuments: 100, Growth: 2, Every: 20 * time.Millisecond, Retry: time.Hour})
	time.Sleep(200 * time.Millisecond)
	if js := jobsOf("umbrella"); len(js) != 0 {
		t.Fatalf("a job while the documents wait for the indexers: %v", js)
	}

	// Taken in: umbrella's encoder is trained and its documents replayed;
	// initech's training fails, once.
	indexAll(t, f.st)
	waitFor("umbrella's first encoder job", func() bool { js := jobsOf("umbrella"); return len(js) == 1 && js[0]["state"] != api.JobRunning })
	job := jobsOf("umbrella")[0]
	enc := job["encoder"].(map[string]any)
	if trained := enc["trained"].(map[string]any); job["state"] != api.JobDone || enc["reason"] != api.EncoderFirst || trained["items"] != 150.0 || trained["replayPending"] != false ||
		job["progress"].(map[string]any)["wiped"] != false || job["progress"].(map[string]any)["documentsReset"] != 150.0 {
		t.Fatalf("umbrella's first job: %v", job)
	}
	first, err := f.st.GetEncoder(ctx, "umbrella")
	if err != nil || first.ReplayPending || first.Documents != 150 {
		t.Fatalf("umbrella's encoder after its replay: %s, replay pending %t, %d documents (%v)", first.Name, first.ReplayPending, first.Documents, err)
	}
	waitFor("initech's job", func() bool { js := jobsOf("initech"); return len(js) == 1 && js[0]["state"] == api.JobFailed })
	indexAll(t, f.st) // the replay sent umbrella's documents back
	time.Sleep(200 * time.Millisecond)
	if js := jobsOf("initech"); len(js) != 1 || !strings.Contains(js[0]["error"].(string), "too few") {
		t.Fatalf("initech's failed training tried again at once, or failed otherwise: %v", js)
	}
	if js := jobsOf("umbrella"); len(js) != 1 {
		t.Fatalf("umbrella trained again before it grew: %v", js)
	}

	// Grown to twice the documents: trained again.
	if _, err := f.st.PutDocuments(ctx, topicDocs("umbrella", 150, 150)); err != nil {
		t.Fatal(err)
	}
	indexAll(t, f.st)
	waitFor("umbrella's second encoder job", func() bool { js := jobsOf("umbrella"); return len(js) == 2 && js[0]["state"] != api.JobRunning })
	if job := jobsOf("umbrella")[0]; job["state"] != api.JobDone || job["encoder"].(map[string]any)["reason"] != api.EncoderGrown {
		t.Fatalf("umbrella's second job: %v", job)
	}
	if e, err := f.st.GetEncoder(ctx, "umbrella"); err != nil || e.Name == first.Name || e.Items != 300 || e.ReplayPending {
		t.Fatalf("umbrella's encoder after it grew: %s on %d items, replay pending %t (%v)", e.Name, e.Items, e.ReplayPending, err)
	}

	// A replay that did not finish (its process stopped) runs again, with
	// no training, whatever the client's queues hold; one of an encoder
	// trained since the schedule started is left to the process that
	// trained it (another on the same store may be running it).
	recent, err := f.st.GetEncoder(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	recent.Client, recent.ReplayPending = "hooli", true
	if err := f.st.PutEncoder(ctx, recent); err != nil {
		t.Fatal(err)
	}
	model, err := f.st.GetEncoder(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	// Trained before this schedule started, by a process since stopped.
	model.Client, model.ReplayPending, model.TrainedAt = "globex", true, time.Now().Add(-time.Hour)
	if err := f.st.PutEncoder(ctx, model); err != nil {
		t.Fatal(err)
	}
	waitFor("globex's replay", func() bool { js := jobsOf("globex"); return len(js) == 1 && js[0]["state"] != api.JobRunning })
	job = jobsOf("globex")[0]
	if enc := job["encoder"].(map[string]any); job["state"] != api.JobDone || enc["reason"] != api.EncoderReplayPending || enc["epochs"] != 0.0 ||
		enc["trained"].(map[string]any)["name"] != model.Name || job["progress"].(map[string]any)["selected"] != 1.0 {
		t.Fatalf("globex's replay: %v", job)
	}
	if e, err := f.st.GetEncoder(ctx, "globex"); err != nil || e.ReplayPending {
		t.Fatalf("globex's encoder after its replay: replay pending %t (%v)", e.ReplayPending, err)
	}
	if js := jobsOf("hooli"); len(js) != 0 {
		t.Fatalf("the replay of an encoder trained since the schedule started was not left to its process: %v", js)
	}
}

// An encoder whose stored model cannot be read is listed so by
// GET /admin/v1/stats, and the schedule trains a damaged one again; one a
// newer jervis wrote is left as it is, for the newer processes.
func TestEncoderScheduleTrainsADamagedEncoderAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, c := range []string{"umbrella", "hooli"} {
		if _, err := f.st.PutClient(ctx, store.Client{ID: c, Name: c}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.PutDocuments(ctx, topicDocs(c, 0, 150)); err != nil {
			t.Fatal(err)
		}
	}
	indexAll(t, f.st)
	old := time.Now().Add(-time.Hour)
	for client, model := range map[string]string{"umbrella": "JVCE\x01 cut short", "hooli": "JVCE\x07 of a later format"} {
		if err := f.st.PutEncoder(ctx, store.Encoder{Client: client, Name: "corpus-0123456789ab", Model: []byte(model), Items: 150, TrainedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	unreadable := func() map[string]string {
		t.Helper()
		code, stats := call(t, "GET", f.url+"/admin/v1/stats", f.admin, "")
		if code != http.StatusOK {
			t.Fatalf("stats: %d %v", code, stats)
		}
		out := map[string]string{}
		for _, e := range stats["encoders"].([]any) {
			e := e.(map[string]any)
			out[e["client"].(string)], _ = e["unreadable"].(string)
		}
		return out
	}
	if u := unreadable(); u["umbrella"] == "" || strings.Contains(u["umbrella"], "newer") || !strings.Contains(u["hooli"], "newer jervis") {
		t.Fatalf("the stats' encoders: %v, want both unreadable, hooli's by a newer jervis", u)
	}

	go f.server.RunEncoderSchedule(ctx, api.EncoderSchedule{Every: 20 * time.Millisecond, Retry: time.Hour})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if e, err := f.st.GetEncoder(ctx, "umbrella"); err == nil && e.Name != "corpus-0123456789ab" && !e.ReplayPending {
			break
		}
		if time.Now().After(deadline) {
			_, all := call(t, "GET", f.url+"/admin/v1/jobs", f.admin, "")
			t.Fatalf("umbrella's damaged encoder not trained again; the jobs: %v", all["items"])
		}
	}
	_, list := call(t, "GET", f.url+"/admin/v1/jobs", f.admin, "")
	var reasons []string
	for _, j := range list["items"].([]any) {
		j := j.(map[string]any)
		reasons = append(reasons, j["request"].(map[string]any)["client"].(string)+": "+j["encoder"].(map[string]any)["reason"].(string))
	}
	if !slices.Equal(reasons, []string{"umbrella: " + api.EncoderUnreadable}) {
		t.Fatalf("the schedule's jobs: %v, want umbrella's only, reason %q", reasons, api.EncoderUnreadable)
	}
	if u := unreadable(); u["umbrella"] != "" || u["hooli"] == "" {
		t.Fatalf("after the training: %v, want umbrella's read, hooli's as it was", u)
	}
	if e, err := f.st.GetEncoder(ctx, "hooli"); err != nil || string(e.Model) != "JVCE\x07 of a later format" {
		t.Fatalf("hooli's encoder, written by a newer jervis, replaced: %q (%v)", e.Model, err)
	}
}

func TestReprocessJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	wait := func(id string) map[string]any { return f.waitJob(t, id) }
	code, job := call(t, "POST", f.url+"/admin/v1/reprocess", f.admin, `{"client":"acme","dryRun":true,"wipe":true}`)
	if code != http.StatusAccepted || job["id"] == nil {
		t.Fatalf("start: %d %v", code, job)
	}
	done := wait(job["id"].(string))
	p := done["progress"].(map[string]any)
	if done["state"] != api.JobDone || p["selected"] != 1.0 || p["processed"] != 1.0 || p["wiped"] != false {
		t.Fatalf("dry run: %v", done)
	}
	if code, _ := call(t, "GET", f.url+"/api/v1/nodes/"+url.PathEscape(f.acme.node), f.acme.key, ""); code != http.StatusOK {
		t.Fatalf("the dry run wiped: %d", code)
	}
	_, job = call(t, "POST", f.url+"/admin/v1/reprocess", f.admin, `{"client":"acme","wipe":true}`)
	if done := wait(job["id"].(string)); done["state"] != api.JobDone || done["progress"].(map[string]any)["wiped"] != true {
		t.Fatalf("wipe: %v", done)
	}
	if code, _ := call(t, "GET", f.url+"/api/v1/nodes/"+url.PathEscape(f.acme.node), f.acme.key, ""); code != http.StatusNotFound {
		t.Fatalf("acme's node after the wipe: %d", code)
	}
	if code, _ := call(t, "GET", f.url+"/api/v1/nodes/"+url.PathEscape(f.globex.node), f.globex.key, ""); code != http.StatusOK {
		t.Fatalf("globex's node after acme's wipe: %d", code)
	}
	_, jobs := call(t, "GET", f.url+"/admin/v1/jobs", f.admin, "")
	if items := jobs["items"].([]any); len(items) != 2 || items[0].(map[string]any)["id"] != job["id"] {
		t.Fatalf("jobs, newest first: %v", jobs)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"client":"acme","wipe":true,"sourceType":"EMAIL"}`, "wipe"},
		{`{"client":"acme","sourceType":"FAX"}`, "sourceType"},
		{`{"client":"acme","since":"yesterday"}`, "body"},
		{`{}`, "client"},
	} {
		code, body := call(t, "POST", f.url+"/admin/v1/reprocess", f.admin, tc.body)
		if _, field := errorOf(body); code != http.StatusBadRequest || field != tc.field {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.body, code, body, tc.field)
		}
	}
	if code, body := call(t, "POST", f.url+"/admin/v1/connections/mail/poll", f.admin, ""); code != http.StatusConflict {
		t.Fatalf("poll now in a process without pollers: %d %v", code, body)
	}
	if code, _ := call(t, "GET", f.url+"/admin/v1/jobs/job_nope", f.admin, ""); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d", code)
	}
}

// GET /admin/v1/stats reports the process's backends, each checked.
func TestStatsReportBackends(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *api.Config) {
		c.Checks = []api.Check{
			{Name: "store:sqlite", Ping: func(context.Context) error { return nil }},
			{Name: "chunks:weaviate", Ping: func(context.Context) error { return errors.New("connection refused") }},
		}
	})
	code, body := call(t, "GET", f.url+"/admin/v1/stats", f.admin, "")
	want := `[map[backend:sqlite ok:true role:store] map[backend:weaviate error:connection refused ok:false role:chunks]]`
	if code != http.StatusOK || fmt.Sprint(body["backends"]) != want {
		t.Fatalf("stats: %d %v", code, body["backends"])
	}
}
