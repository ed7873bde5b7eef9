package agent

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/jervis-dev/jervis/kb"
)

type param struct {
	name, typ, desc string
	required        bool
	enum            []string
	maxLen          int
	ref             bool // a namespace:value ref
}

type toolSpec struct {
	name, desc string
	params     []param
}

func specs() []toolSpec {
	return []toolSpec{
		{"storeChunk", "Store a note worth keeping about the document.", []param{
			{name: "text", typ: "string", desc: "the note", required: true, maxLen: 4000}}},
		{"searchHybrid", "Search the knowledge base (keywords and meaning).", []param{
			{name: "query", typ: "string", desc: "what to look for", required: true, maxLen: 500},
			{name: "limit", typ: "integer", desc: "passages, 1-10"}}},
		{"indexDocument", "Store a derived document (for example a decision record) linked to this one.", []param{
			{name: "title", typ: "string", desc: "title", required: true, maxLen: 200},
			{name: "content", typ: "string", desc: "text", required: true, maxLen: 8000}}},
		{"createNodeWithRagLinks", "Create an entity the prose mentions, with the sentence that mentions it.", []param{
			{name: "key", typ: "string", desc: "ref namespace:value", required: true, maxLen: 300, ref: true},
			{name: "text", typ: "string", desc: "the sentence of the document that mentions it", required: true, maxLen: 2000}}},
		{"createRelationship", "Relate two refs; evidence is the exact sentence of the document that states it.", []param{
			{name: "from", typ: "string", desc: "ref namespace:value", required: true, maxLen: 300, ref: true},
			{name: "type", typ: "string", desc: "relation type, e.g. owns, blocks, decided", required: true, maxLen: 64},
			{name: "to", typ: "string", desc: "ref namespace:value", required: true, maxLen: 300, ref: true},
			{name: "evidence", typ: "string", desc: "exact sentence from the document", required: true, maxLen: 2000}}},
		{"routeTask", "Decide what happens to the document; call once, last.", []param{
			{name: "decision", typ: "string", desc: "DONE or READY_FOR_GPU", required: true, enum: []string{"DONE", "READY_FOR_GPU"}},
			{name: "reason", typ: "string", desc: "why, in one sentence", required: true, maxLen: 500},
			{name: "summary", typ: "string", desc: "what the document says and asks, for whoever acts on it", maxLen: 2000}}},
	}
}

// tools returns the tool definitions sent to the model.
func tools() api.Tools {
	var out api.Tools
	for _, s := range specs() {
		props := api.NewToolPropertiesMap()
		var required []string
		for _, p := range s.params {
			prop := api.ToolProperty{Type: api.PropertyType{p.typ}, Description: p.desc}
			for _, e := range p.enum {
				prop.Enum = append(prop.Enum, e)
			}
			props.Set(p.name, prop)
			if p.required {
				required = append(required, p.name)
			}
		}
		out = append(out, api.Tool{Type: "function", Function: api.ToolFunction{Name: s.name, Description: s.desc,
			Parameters: api.ToolFunctionParameters{Type: "object", Required: required, Properties: props}}})
	}
	return out
}

var edgeType = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// validate checks a call against its tool's schema.
func validate(c Call) error {
	i := slices.IndexFunc(specs(), func(s toolSpec) bool { return s.name == c.Name })
	if i < 0 {
		return fmt.Errorf("unknown tool %q", c.Name)
	}
	spec := specs()[i]
	for name := range c.Args {
		if !slices.ContainsFunc(spec.params, func(p param) bool { return p.name == name }) {
			return fmt.Errorf("%s: unknown argument %q", c.Name, name)
		}
	}
	for _, p := range spec.params {
		v, ok := c.Args[p.name]
		if !ok {
			if p.required {
				return fmt.Errorf("%s: %s is required", c.Name, p.name)
			}
			continue
		}
		switch p.typ {
		case "string":
			s, ok := v.(string)
			switch {
			case !ok:
				return fmt.Errorf("%s: %s must be a string", c.Name, p.name)
			case p.required && strings.TrimSpace(s) == "":
				return fmt.Errorf("%s: %s is empty", c.Name, p.name)
			case p.maxLen > 0 && len(s) > p.maxLen:
				return fmt.Errorf("%s: %s is longer than %d", c.Name, p.name, p.maxLen)
			case len(p.enum) > 0 && !slices.Contains(p.enum, s):
				return fmt.Errorf("%s: %s must be one of %v", c.Name, p.name, p.enum)
			}
			if p.ref {
				if _, err := kb.ParseRef(s); err != nil {
					return fmt.Errorf("%s: %s: %v", c.Name, p.name, err)
				}
			}
			if p.name == "type" && !edgeType.MatchString(s) {
				return fmt.Errorf("%s: type %q must match %s", c.Name, s, edgeType)
			}
		case "integer":
			f, ok := v.(float64)
			if !ok || f != math.Trunc(f) || f < 1 || f > 10 {
				return fmt.Errorf("%s: %s must be a whole number 1-10", c.Name, p.name)
			}
		}
	}
	return nil
}
