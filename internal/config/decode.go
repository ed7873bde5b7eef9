package config

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DecodeNode sets v (a pointer to a struct with yaml tags) from node as the
// configuration is decoded: strictly, every error naming the key under
// path (a source kind reads its connection section so).
func DecodeNode(node *yaml.Node, v any, path string) error {
	return decode(node, reflect.ValueOf(v).Elem(), path)
}

// decode sets v from node, naming the key path in every error.
func decode(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Duration]() {
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
			return nil
		}
		if node.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s: want a mapping of keys, got %s", node.Line, orRoot(path), kind(node))
		}
		fields := yamlFields(v.Type())
		remain, hasRemain := fields[",remain"]
		delete(fields, ",remain")
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i], node.Content[i+1]
			idx, ok := fields[key.Value]
			if !ok && hasRemain { // another key: kept as it is, for whoever reads it
				m := v.Field(remain)
				if m.IsNil() {
					m.Set(reflect.MakeMap(m.Type()))
				}
				m.SetMapIndex(reflect.ValueOf(key.Value), reflect.ValueOf(val))
				continue
			}
			if !ok {
				return fmt.Errorf("line %d: unknown key %q (known keys%s: %s)", key.Line, join(path, key.Value), inPath(path), strings.Join(sortedKeys(fields), ", "))
			}
			if err := decode(val, v.Field(idx), join(path, key.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	if v.Kind() == reflect.Slice {
		if node.Kind != yaml.SequenceNode {
			return fmt.Errorf("line %d: %s: want a list, got %s", node.Line, path, kind(node))
		}
		if len(node.Content) == 0 {
			v.Set(reflect.Zero(v.Type())) // "[]" is the same as leaving it out
			return nil
		}
		out := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		for i, item := range node.Content {
			if err := decode(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want a single value, got %s", node.Line, path, kind(node))
	}
	if err := setScalar(v, node.Value); err != nil {
		return fmt.Errorf("line %d: %s: %w", node.Line, path, err)
	}
	return nil
}

// setScalar parses s into v by v's type.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (examples: 500ms, 30s, 5m)", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

// EnvVars maps every JERVIS_* variable to its key path.
func EnvVars() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := join(path, f.Tag.Get("yaml"))
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(f.Type, p)
				continue
			}
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
				continue // a list of sections (connections): file only
			}
			out[envName(p)] = p
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}

func envName(path string) string {
	return "JERVIS_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(path))
}

func applyEnv(c *Config, environ []string) error {
	known := EnvVars()
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "JERVIS_") || slices.Contains(SecretEnvVars, name) {
			continue
		}
		path, ok := known[name]
		if !ok {
			return fmt.Errorf("config: environment variable %s is not a setting (known: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
		if err := setScalar(field(reflect.ValueOf(c).Elem(), path), value); err != nil {
			return fmt.Errorf("config: %s (%s): %w", name, path, err)
		}
	}
	return nil
}

// field returns the field at a dotted key path.
func field(v reflect.Value, path string) reflect.Value {
	for _, part := range strings.Split(path, ".") {
		v = v.Field(yamlFields(v.Type())[part])
	}
	return v
}

func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		out[t.Field(i).Tag.Get("yaml")] = i
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string { return cmp.Or(path, "the document") }

func inPath(path string) string {
	if path == "" {
		return ""
	}
	return " under " + path
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}
