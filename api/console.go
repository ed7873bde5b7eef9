package api

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// console holds the web console: static files, no build step, embedded in
// the binary. It talks to the REST API like any other client.
//
//go:embed console
var console embed.FS

// ConsolePolicy is the console's Content-Security-Policy: its own scripts
// and styles only (no inline script or style), API calls to its own origin,
// never framed.
const ConsolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveConsole answers GET / with the console's page and GET /console/…
// with its files. The page names its files and the API by relative URLs,
// so it works behind a path prefix.
func serveConsole(w http.ResponseWriter, r *http.Request) {
	name := "console/index.html"
	if r.URL.Path != "/" {
		name = path.Clean(strings.TrimPrefix(r.URL.Path, "/"))
	}
	b, err := fs.ReadFile(console, name)
	if err != nil || !strings.HasPrefix(name, "console/") {
		writeError(w, notFound("route "+r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", ConsolePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		h.Set("Content-Type", "image/svg+xml")
	}
	w.Write(b)
}
