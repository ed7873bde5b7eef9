package deploy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// layers says which top-level packages each layer may not import
// (ARCHITECTURE §2: internal/ only points down; the stages above it point
// down too).
// The three stages are peers that talk through the store (the payload
// types and TaskMemory live there): none imports another; a stage's test
// helper (a package whose name ends in "test") may run the others.
var layers = map[string][]string{
	"internal":  {"kb", "pollers", "indexers", "qualifier", "executor", "api", "cmd"},
	"kb":        {"pollers", "indexers", "qualifier", "executor", "api", "cmd"},
	"pollers":   {"indexers", "qualifier", "executor", "api", "cmd"},
	"indexers":  {"qualifier", "executor", "api", "cmd"},
	"qualifier": {"indexers", "executor", "api", "cmd"},
	"executor":  {"indexers", "qualifier", "api", "cmd"},
	"api":       {"cmd"},
}

// Every package's dependencies (go list -deps: all of them, transitively,
// tests left out) point down the layers.
func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	const mod = "github.com/jervis-dev/jervis/"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], mod) {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], mod)
		layer, _, _ := strings.Cut(pkg, "/")
		forbidden := layers[layer]
		if forbidden == nil {
			continue
		}
		if strings.HasSuffix(pkg, "test") && (layer == "indexers" || layer == "qualifier" || layer == "executor") {
			forbidden = layers["api"] // a stage's test helper may run the other stages
		}
		checked++
		for _, dep := range fields[1:] {
			d, ok := strings.CutPrefix(dep, mod)
			if !ok {
				continue
			}
			top, _, _ := strings.Cut(d, "/")
			for _, f := range forbidden {
				if top == f {
					t.Errorf("%s imports %s: %s may not depend on %s", pkg, d, layer, f)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d packages checked", checked)
	}
}
