// Package kinds lists the source kinds this build knows: adding a kind is
// one package under pollers/ and one line here. cmd/jervis builds its
// registry from this list (explicitly: nothing registers itself), and so
// do tests that run the whole pipeline.
package kinds

import (
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/confluence"
	"github.com/jervis-dev/jervis/pollers/email"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/git"
	"github.com/jervis-dev/jervis/pollers/jira"
)

// Builtin are the kinds of this build, in the order they are asked to read
// a file (email before the note kind for a .txt list archive; Jira before
// Confluence for .json).
func Builtin() []pollers.Kind {
	return []pollers.Kind{
		email.Kind{},
		jira.Kind{},
		confluence.Kind{},
		git.Kind{},
		filedrop.Kind{},
	}
}

// Registry returns the registry of the built-in kinds and any more (an
// error when one of them has the name, source type or connection type of
// another).
func Registry(more ...pollers.Kind) (*pollers.Registry, error) {
	return pollers.NewRegistry(append(Builtin(), more...)...)
}

// Default is the registry of the built-in kinds.
func Default() *pollers.Registry {
	r, _ := Registry() // the built-in kinds are unique (TestBuiltinKindsAreUnique)
	return r
}
