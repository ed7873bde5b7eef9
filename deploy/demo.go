// Package deploy holds what ships beside the binary: the example
// configuration, the docker-compose stack, and the demo corpus, which is
// compiled in (Demo) so that `jervis serve --demo` works from anywhere.
package deploy

import (
	"embed"
	"io/fs"
)

//go:embed demo/email demo/jira demo/confluence demo/git/commits.json
var demo embed.FS

// Demo returns the demo corpus (see demo/gen): email/, jira/, confluence/
// and git/commits.json.
func Demo() fs.FS {
	sub, _ := fs.Sub(demo, "demo")
	return sub
}
