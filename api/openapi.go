package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of this API (openapi.yaml); a test
// holds it to the registered routes and the real responses.
//
//go:embed openapi.yaml
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(OpenAPI)
}
