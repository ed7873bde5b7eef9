package api_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jervis-dev/jervis/api"
	"github.com/jervis-dev/jervis/executor"
	"github.com/jervis-dev/jervis/indexers"
	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

// TestConsoleSecurity: the console's page and files carry a strict
// Content-Security-Policy, no inline script, style or handler, and no key.
func TestConsoleSecurity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, err := http.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("GET /: %d, CSP %q", resp.StatusCode, csp)
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>[^<]*`).FindAllString(string(page), -1) {
		if !strings.Contains(tag, " src=") || !strings.HasSuffix(tag, ">") {
			t.Fatalf("the page has an inline script: %s", tag)
		}
	}
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`<style`), regexp.MustCompile(`javascript:`)} {
		if bad.Match(page) {
			t.Fatalf("the page has inline script or style (%s):\n%s", bad, page)
		}
	}
	// Every file of the console: no secret, and served with the policy.
	err = fs.WalkDir(os.DirFS("console"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		resp, err := http.Get(f.url + "/console/" + p)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != api.ConsolePolicy || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("console/%s: %d %v", p, resp.StatusCode, resp.Header)
		}
		for _, secret := range []string{api.KeyPrefix, f.admin, f.acme.key, "Bearer jvk"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("console/%s holds %q", p, secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/../openapi.yaml", "/console/nope.js", "/index.html"} {
		if code, _ := get(t, f.url+p); code != http.StatusNotFound && p != "/console/../openapi.yaml" {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
}

// consoleServer serves the API and the console over the demo corpus
// (imported and qualified), behind a path prefix as a proxy would.
func consoleServer(t *testing.T, prefix string) (base, clientKey, adminKey string, polled func() []string) {
	t.Helper()
	ctx := context.Background()
	all := embeddedtest.Open(t, "")
	st, k := all.Store, all.KB.KB
	admin, err := api.EnsureAdminKey(ctx, st, "")
	if err != nil {
		t.Fatal(err)
	}
	im := &importer.Importer{Client: importer.DemoClient, Connection: "demo", Kinds: kinds.Default(), DataDir: t.TempDir()}
	if _, err := im.Demo(ctx, st); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Drain(t, st, k, nil)
	// The pipeline keeps running, as in serve: what arrives is indexed,
	// quarantined or qualified while the console watches.
	ix, err := indexers.New(st, indexers.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	q, err := qualifier.New(qualifier.Config{Store: st, KB: k, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ix.Run(runCtx) })
	wg.Go(func() { q.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	secret, key, err := api.NewKey(store.RoleClient, importer.DemoClient, "console test")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	monitor := executor.NewMonitor(time.Minute)
	var mu sync.Mutex
	var polls []string
	pollNow := func(id string) error { // as pollers.Scheduler.PollNow answers
		if id != "demo-mail" {
			return pollers.ErrUnknownConnection
		}
		mu.Lock()
		defer mu.Unlock()
		polls = append(polls, id)
		return nil
	}
	s := api.New(api.Config{Store: st, KB: k, Graph: all.Graph, Chunks: all.Chunks, Logger: slog.New(slog.DiscardHandler), RateLimit: -1,
		Tracker: monitor, Executor: monitor, PollNow: pollNow,
		Connections: []api.Connection{{ID: "demo-mail", Client: importer.DemoClient, Type: "imap", Schedule: "@every 2m"}}})
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(http.StripPrefix(strings.TrimSuffix(prefix, "/"), mux))
	t.Cleanup(srv.Close)
	return srv.URL + prefix, secret, admin, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(polls) }
}

// browser starts a headless Chromium (Debian's chromium; .ci/run installs
// it) at a window size.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		integration.Missing(t, "chromium", ".ci/run installs Debian's chromium", "apt-get install chromium, or set CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(width, height),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelT)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// step runs browser actions; on failure it saves a screenshot into the
// test's artifacts and fails.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var shot []byte
		if chromedp.Run(ctx, chromedp.FullScreenshot(&shot, 80)) == nil {
			name := filepath.Join(t.ArtifactDir(), regexp.MustCompile(`\W+`).ReplaceAllString(what, "-")+".jpg")
			if os.WriteFile(name, shot, 0o644) == nil {
				t.Logf("screenshot: %s", name)
			}
		}
		var page string
		if chromedp.Run(ctx, chromedp.Evaluate(`document.location.href + "\n" + document.body.innerText`, &page)) == nil {
			t.Logf("the page: %s", page)
		}
		t.Fatalf("%s: %v", what, err)
	}
}

// TestConsoleInABrowser drives the console in a real headless Chromium
// over the demo corpus, served under a path prefix: sign in with a client
// key, search, open an item, its graph and an edge's evidence; watch a
// document arrive through the event stream; read a quarantined document's
// reason; the READY_FOR_GPU queue with a task's TaskMemory; then, with the
// admin key, the pipeline's counters, a dry-run reprocess, a quarantined
// document's retry, a client's new key (its secret once) revoked, and a
// link pattern. With JERVIS_CONSOLE_SCREENSHOTS=DIR it also writes each
// screen at desktop and phone width into DIR (docs/console).
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	base, clientKey, adminKey, polled := consoleServer(t, "/jervis/")
	shots := os.Getenv("JERVIS_CONSOLE_SCREENSHOTS")
	for _, size := range []struct {
		name          string
		width, height int
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		if size.name == "phone" && shots == "" {
			continue
		}
		t.Run(size.name, func(t *testing.T) {
			ctx := browser(t, size.width, size.height)
			shot := func(name string) chromedp.Action {
				return chromedp.ActionFunc(func(ctx context.Context) error {
					if shots == "" {
						return nil
					}
					var b []byte
					if err := chromedp.CaptureScreenshot(&b).Do(ctx); err != nil {
						return err
					}
					return os.WriteFile(filepath.Join(shots, name+"-"+size.name+".png"), b, 0o644)
				})
			}
			// The first page's load time (navigation timing), median of 5
			// loads: reported (the target is 300 ms on a quiet machine);
			// only a gross regression fails, since go test runs packages
			// side by side.
			var loads []float64
			for range 5 {
				var ms float64
				step(t, ctx, "load the page", chromedp.Navigate(base), chromedp.WaitVisible("#key", chromedp.ByQuery),
					chromedp.Evaluate(`performance.getEntriesByType("navigation")[0].duration`, &ms))
				loads = append(loads, ms)
			}
			slices.Sort(loads)
			t.Logf("first page: median load %.0f ms over 5 (%v)", loads[2], loads)
			if loads[2] > 2000 {
				t.Errorf("the first page takes %.0f ms to load", loads[2])
			}
			step(t, ctx, "sign in", shot("1-sign-in"),
				chromedp.SendKeys("#key", clientKey+"\r", chromedp.ByQuery),
				chromedp.WaitVisible("#q", chromedp.ByQuery))
			var stored string
			step(t, ctx, "the key stays in the tab's session storage, not in the URL", chromedp.Evaluate(`sessionStorage.getItem("jervis.key")`, &stored))
			if stored != clientKey {
				t.Fatalf("sessionStorage holds %q", stored)
			}

			var results string
			step(t, ctx, "search", chromedp.SendKeys("#q", "battery range\r", chromedp.ByQuery),
				chromedp.WaitVisible("#results mark", chromedp.ByQuery), chromedp.Text("#results", &results, chromedp.ByQuery), shot("2-search"))
			if !strings.Contains(strings.ToLower(results), "battery") || !strings.Contains(results, "items in") || !strings.Contains(results, "· 2026-") ||
				!strings.Contains(results, "the source document") {
				t.Fatalf("results: %s", results)
			}

			// Contrast (WCAG 2): every text element on the results page
			// against the background it is drawn on, at least 4.5:1.
			var low []string
			step(t, ctx, "contrast", chromedp.Evaluate(contrastCheck, &low))
			if len(low) > 0 {
				t.Fatalf("text below 4.5:1 contrast: %v", low)
			}
			var nodes int
			var itemDoc string
			step(t, ctx, "open an item, its document and its graph", chromedp.Click("#results .item h2 a", chromedp.ByQuery),
				chromedp.WaitVisible("svg.graph .node", chromedp.ByQuery),
				chromedp.Evaluate(`document.querySelectorAll("svg.graph .node").length`, &nodes),
				chromedp.WaitVisible("#item-document", chromedp.ByQuery), chromedp.Text("#item-document", &itemDoc, chromedp.ByQuery))
			if nodes < 2 {
				t.Fatalf("the graph shows %d nodes", nodes)
			}
			if !strings.Contains(itemDoc, "observed 2026-") || !strings.Contains(itemDoc, "1 version: 1 (") {
				t.Fatalf("the item's document: %q", itemDoc)
			}
			var evidence string
			step(t, ctx, "an edge's evidence", chromedp.Click("ul.edges button", chromedp.ByQuery),
				chromedp.WaitVisible("#evidence .evidence-text", chromedp.ByQuery), chromedp.Text("#evidence", &evidence, chromedp.ByQuery),
				chromedp.Evaluate(`window.scrollTo(0, 0)`, nil), shot("3-item-graph"))
			if !strings.Contains(evidence, "origin") || len(evidence) < 40 {
				t.Fatalf("evidence: %s", evidence)
			}
			// The drawing by keyboard: an edge focused and Enter shows its evidence.
			step(t, ctx, "an edge by keyboard", chromedp.Evaluate(`document.getElementById("evidence").textContent = ""`, nil),
				chromedp.Focus("svg.graph g.edge", chromedp.ByQuery), chromedp.KeyEvent("\r"),
				chromedp.WaitVisible("#evidence .evidence-text", chromedp.ByQuery))
			step(t, ctx, "depth 2", chromedp.Click(".depth a", chromedp.ByQuery), chromedp.WaitVisible(".depth strong", chromedp.ByQuery))

			// A document arrives while the documents screen is open: the
			// event counter moves and the list shows it.
			step(t, ctx, "documents", chromedp.Navigate(base+"#/documents"), chromedp.WaitVisible("#documents table", chromedp.ByQuery))
			code, body := call(t, "POST", strings.TrimSuffix(base, "/")+"/api/v1/ingest", clientKey, `{"name":"console-arrival-`+size.name+`.md","content":"# Arrival `+size.name+`\n\nA note that arrived while the console watched."}`)
			if code != http.StatusAccepted {
				t.Fatalf("ingest: %d %v", code, body)
			}
			var count string
			step(t, ctx, "the event stream moves the counter and the list", chromedp.Poll(`document.getElementById("event-count").textContent !== "0" &&
				document.getElementById("documents").textContent.includes("Arrival `+size.name+`")`, nil, chromedp.WithPollingTimeout(15*time.Second)),
				chromedp.Text("#event-count", &count, chromedp.ByQuery), shot("4-documents"))
			t.Logf("%s events seen live", count)

			code, body = call(t, "POST", strings.TrimSuffix(base, "/")+"/api/v1/ingest", clientKey, `{"name":"empty-`+size.name+`.md","content":""}`)
			if code != http.StatusAccepted {
				t.Fatalf("ingest: %d %v", code, body)
			}
			// The pipeline quarantines it (asked through the API, so that a
			// slow machine fails here, with how long it waited, and not
			// in the browser).
			quarantinedAt := time.Now()
			for {
				code, body := call(t, "GET", strings.TrimSuffix(base, "/")+"/api/v1/documents?state=QUARANTINED&limit=200", clientKey, "")
				if code == http.StatusOK && strings.Contains(fmt.Sprint(body["items"]), "empty-"+size.name) {
					break
				}
				if time.Since(quarantinedAt) > time.Minute {
					t.Fatalf("the empty document is not quarantined after %s: %d %v", time.Since(quarantinedAt), code, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("the empty document quarantined in %s", time.Since(quarantinedAt).Round(time.Millisecond))
			var reason string
			quarantinedRow := `[...document.querySelectorAll("#documents tbody tr")].find(r => r.textContent.includes("QUARANTINED") && r.textContent.includes("empty-` + size.name + `"))`
			step(t, ctx, "a quarantined document's reason", chromedp.Navigate(base+"#/documents?state=QUARANTINED"),
				chromedp.Poll(quarantinedRow+` !== undefined`, nil, chromedp.WithPollingTimeout(15*time.Second)),
				chromedp.Evaluate(quarantinedRow+`.querySelector("a").click()`, nil),
				chromedp.WaitVisible("#quarantine-reason", chromedp.ByQuery), chromedp.Text("#quarantine-reason", &reason, chromedp.ByQuery), shot("5-quarantined"))
			if !strings.HasPrefix(reason, "Quarantined: ") || len(reason) < 20 {
				t.Fatalf("reason: %q", reason)
			}
			var quarantinedID, routing string
			step(t, ctx, "the quarantined document's ID", chromedp.Text("#document-id", &quarantinedID, chromedp.ByQuery))

			// The tasks routed to the GPU, each with its TaskMemory.
			step(t, ctx, "the READY_FOR_GPU queue", chromedp.Navigate(base+"#/tasks"), chromedp.WaitVisible("#tasks tbody a", chromedp.ByQuery),
				chromedp.Click("#tasks tbody a", chromedp.ByQuery), chromedp.WaitVisible("#routing", chromedp.ByQuery),
				chromedp.Text("#routing", &routing, chromedp.ByQuery), shot("8-task"))
			if !strings.HasPrefix(routing, "READY_FOR_GPU: ") || len(routing) < 25 {
				t.Fatalf("routing: %q", routing)
			}

			// The admin key: the pipeline and a dry-run reprocess.
			var stats, result string
			step(t, ctx, "sign in as admin", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#key", chromedp.ByQuery),
				chromedp.SendKeys("#key", adminKey+"\r", chromedp.ByQuery),
				chromedp.WaitVisible("#stats table", chromedp.ByQuery), chromedp.Text("#stats", &stats, chromedp.ByQuery), shot("6-pipeline"))
			if !strings.Contains(stats, "Documents by state") || !strings.Contains(stats, "INDEXED") || !strings.Contains(stats, "QUARANTINED") ||
				!strings.Contains(stats, "yielding to users") {
				t.Fatalf("pipeline: %s", stats)
			}
			// Live: a document arriving moves the pipeline's event counter.
			code, body = call(t, "POST", strings.TrimSuffix(base, "/")+"/api/v1/ingest", clientKey, `{"name":"pipeline-`+size.name+`.md","content":"# Seen by the pipeline\n\nA note."}`)
			if code != http.StatusAccepted {
				t.Fatalf("ingest: %d %v", code, body)
			}
			step(t, ctx, "the pipeline's events live", chromedp.Poll(`document.getElementById("pipeline-events").textContent !== "0"`, nil,
				chromedp.WithPollingTimeout(15*time.Second)))
			step(t, ctx, "a dry-run reprocess", chromedp.Navigate(base+"#/operate"), chromedp.WaitReady("#client option", chromedp.ByQuery),
				chromedp.SetValue("#client", importer.DemoClient, chromedp.ByQuery), chromedp.Click("#main form button[type=submit]", chromedp.ByQuery),
				chromedp.WaitVisible("#job-result", chromedp.ByQuery), chromedp.Text("#job-result", &result, chromedp.ByQuery), shot("7-reprocess"))
			if !strings.HasPrefix(result, "Would replay ") || strings.HasPrefix(result, "Would replay 0 ") {
				t.Fatalf("dry run: %q", result)
			}
			// Poll a connection now.
			var pollResult string
			step(t, ctx, "poll a connection now", chromedp.Click("#main section[aria-label=Connections] button", chromedp.ByQuery),
				chromedp.WaitVisible("#poll-result p", chromedp.ByQuery), chromedp.Text("#poll-result", &pollResult, chromedp.ByQuery))
			if pollResult != "demo-mail: poll requested" || !slices.Contains(polled(), "demo-mail") {
				t.Fatalf("poll now: %q, polled %v", pollResult, polled())
			}
			// Retry the quarantined document: a reprocess of it alone.
			step(t, ctx, "retry a document", chromedp.Navigate(base+"#/pipeline"), chromedp.Navigate(base+"#/operate"), chromedp.WaitReady("#client option", chromedp.ByQuery),
				chromedp.SendKeys("#documents", quarantinedID, chromedp.ByQuery), chromedp.Click("#dry", chromedp.ByQuery),
				chromedp.Click("#main form button[type=submit]", chromedp.ByQuery),
				chromedp.Poll(`document.getElementById("job-result") !== null && !document.getElementById("job-result").textContent.startsWith("Would")`, nil,
					chromedp.WithPollingTimeout(15*time.Second)),
				chromedp.Text("#job-result", &result, chromedp.ByQuery))
			if !strings.HasPrefix(result, "Replayed 1 documents") {
				t.Fatalf("retry: %q", result)
			}

			// A client's keys (the secret shown once) and link patterns.
			var secret, keysText, patterns string
			step(t, ctx, "a new key", chromedp.Navigate(base+"#/clients/demo"), chromedp.WaitVisible("#key-name", chromedp.ByQuery), shot("9-clients"),
				chromedp.SendKeys("#key-name", "console "+size.name+"\r", chromedp.ByQuery),
				chromedp.WaitVisible("#secret", chromedp.ByQuery), chromedp.Text("#secret", &secret, chromedp.ByQuery))
			if !strings.HasPrefix(secret, api.KeyPrefix) {
				t.Fatalf("secret: %q", secret)
			}
			if code, _ := call(t, "GET", strings.TrimSuffix(base, "/")+"/api/v1/documents?limit=1", secret, ""); code != http.StatusOK {
				t.Fatalf("the new key: %d", code)
			}
			step(t, ctx, "revoke it", chromedp.Evaluate(`[...document.querySelectorAll("#client-detail tr")].find(r => r.textContent.includes("console `+size.name+`")).querySelector("button").click()`, nil),
				chromedp.Poll(`[...document.querySelectorAll("#client-detail tr")].some(r => r.textContent.includes("console `+size.name+`") && r.textContent.includes("revoked"))`, nil,
					chromedp.WithPollingTimeout(10*time.Second)), chromedp.Text("#client-detail", &keysText, chromedp.ByQuery))
			if code, _ := call(t, "GET", strings.TrimSuffix(base, "/")+"/api/v1/documents?limit=1", secret, ""); code != http.StatusUnauthorized {
				t.Fatalf("the revoked key: %d", code)
			}
			step(t, ctx, "a link pattern", chromedp.SendKeys("#pattern", "ads-"+size.name+".example\r", chromedp.ByQuery),
				chromedp.Poll(`document.getElementById("patterns") && document.getElementById("patterns").textContent.includes("ads-`+size.name+`.example")`, nil,
					chromedp.WithPollingTimeout(10*time.Second)), chromedp.Text("#patterns", &patterns, chromedp.ByQuery))
			if !strings.Contains(patterns, "block ads-"+size.name+".example") {
				t.Fatalf("patterns: %q", patterns)
			}

			var leaked bool
			step(t, ctx, "no key in the URL", chromedp.Evaluate(fmt.Sprintf(`location.href.includes(%q) || location.href.includes(%q)`, clientKey, adminKey), &leaked))
			if leaked {
				t.Fatal("a key is in the URL")
			}
		})
	}
}

// contrastCheck lists the text elements of the page whose colour against
// their background (the nearest ancestor's opaque one) is below 4.5:1.
const contrastCheck = `(() => {
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const bg = (e) => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length === 3 || c[3] > 0) return c.slice(0, 3); } return [255, 255, 255]; };
  const low = [];
  for (const e of document.querySelectorAll("body *")) {
    if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()) || !e.getClientRects().length || e.closest("svg")) continue;
    const a = lum(rgb(getComputedStyle(e).color).slice(0, 3)), b = lum(bg(e));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(e.tagName + "." + e.className + " " + ratio.toFixed(2));
  }
  return low;
})()`
