// Package llmtools describes the tools an Ollama model may call and checks
// its calls against them before anything runs: required arguments, types,
// enums, lengths, patterns, refs, no unknown arguments.
package llmtools

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/ollama/ollama/api"
)

// Param is one argument of a tool.
type Param struct {
	Name, Type, Desc string // Type: "string" or "integer"
	Required         bool
	Enum             []string
	MaxLen           int            // strings: most bytes; 0 = any
	Pattern          *regexp.Regexp // strings: must match
	// Check, when set, validates a string further (a ref: kb.CheckRef);
	// its error is answered to the model.
	Check    func(string) error
	Min, Max int // integers: bounds (both 0 = 1..10)
}

// Spec is one tool.
type Spec struct {
	Name, Desc string
	Params     []Param
}

// Call is one tool call of a model.
type Call struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// Tools returns the tool definitions sent to the model.
func Tools(specs []Spec) api.Tools {
	var out api.Tools
	for _, s := range specs {
		props := api.NewToolPropertiesMap()
		var required []string
		for _, p := range s.Params {
			prop := api.ToolProperty{Type: api.PropertyType{p.Type}, Description: p.Desc}
			for _, e := range p.Enum {
				prop.Enum = append(prop.Enum, e)
			}
			props.Set(p.Name, prop)
			if p.Required {
				required = append(required, p.Name)
			}
		}
		out = append(out, api.Tool{Type: "function", Function: api.ToolFunction{Name: s.Name, Description: s.Desc,
			Parameters: api.ToolFunctionParameters{Type: "object", Required: required, Properties: props}}})
	}
	return out
}

// Validate checks a call against its tool's spec.
func Validate(specs []Spec, c Call) error {
	i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == c.Name })
	if i < 0 {
		return fmt.Errorf("unknown tool %q", c.Name)
	}
	spec := specs[i]
	for name := range c.Args {
		if !slices.ContainsFunc(spec.Params, func(p Param) bool { return p.Name == name }) {
			return fmt.Errorf("%s: unknown argument %q", c.Name, name)
		}
	}
	for _, p := range spec.Params {
		v, ok := c.Args[p.Name]
		if !ok {
			if p.Required {
				return fmt.Errorf("%s: %s is required", c.Name, p.Name)
			}
			continue
		}
		switch p.Type {
		case "string":
			s, ok := v.(string)
			switch {
			case !ok:
				return fmt.Errorf("%s: %s must be a string", c.Name, p.Name)
			case p.Required && strings.TrimSpace(s) == "":
				return fmt.Errorf("%s: %s is empty", c.Name, p.Name)
			case p.MaxLen > 0 && len(s) > p.MaxLen:
				return fmt.Errorf("%s: %s is longer than %d", c.Name, p.Name, p.MaxLen)
			case len(p.Enum) > 0 && !slices.Contains(p.Enum, s):
				return fmt.Errorf("%s: %s must be one of %v", c.Name, p.Name, p.Enum)
			case p.Pattern != nil && !p.Pattern.MatchString(s):
				return fmt.Errorf("%s: %s %q must match %s", c.Name, p.Name, s, p.Pattern)
			}
			if p.Check != nil {
				if err := p.Check(s); err != nil {
					return fmt.Errorf("%s: %s: %v", c.Name, p.Name, err)
				}
			}
		case "integer":
			lo, hi := p.Min, p.Max
			if lo == 0 && hi == 0 {
				lo, hi = 1, 10
			}
			f, ok := v.(float64)
			if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
				return fmt.Errorf("%s: %s must be a whole number %d-%d", c.Name, p.Name, lo, hi)
			}
		}
	}
	return nil
}

// String returns the string argument name of c ("" when absent).
func (c Call) String(name string) string { s, _ := c.Args[name].(string); return s }

// Int returns the integer argument name of c, or def when absent.
func (c Call) Int(name string, def int) int {
	if f, ok := c.Args[name].(float64); ok {
		return int(f)
	}
	return def
}

// DefaultHost is where Ollama listens unless configured otherwise.
const DefaultHost = "http://127.0.0.1:11434"

// Client returns an Ollama API client for host ("" = DefaultHost) over hc
// (nil = http.DefaultClient); it does not contact the server.
func Client(host string, hc *http.Client) (*api.Client, error) {
	u, err := url.Parse(cmp.Or(host, DefaultHost))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("ollama host %q is not an http(s) URL", host)
	}
	return api.NewClient(u, cmp.Or(hc, http.DefaultClient)), nil
}
