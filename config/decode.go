package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"
)

// Error is one problem in a configuration file, with where it is.
type Error struct {
	File  string
	Line  int
	Col   int
	Field string // the field's path, for example "routes[0].policies.timeout"
	Msg   string
}

// Error formats the problem as "file:line:col: field: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file. Its Error method lists them one
// per line.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("250ms", "5s", "1m30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

var durationType = reflect.TypeOf(Duration(0))

// decoder decodes a yaml.Node tree into Go values strictly: unknown fields,
// duplicate keys and values of the wrong type are all errors, and every error
// is kept so that they can be reported at once.
type decoder struct {
	file  string
	errs  Errors
	pos   map[string][2]int // field path → line, col of its value
	given map[string]bool   // field path → the file gives it a value other than null
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	e := &Error{File: d.file, Field: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.pos[path] = [2]int{n.Line, n.Column}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an explicit null leaves the default
	}
	d.given[path] = true
	if v.Type() == durationType {
		d.duration(n, v, path)
		return
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok && v.Kind() != reflect.Pointer {
		// A typed value of its own (an enum such as ratelimit.ErrorPolicy):
		// its text is decoded once, here, and its error has a position.
		if s, ok := d.scalar(n, path, "a string"); ok {
			if err := u.UnmarshalText([]byte(s)); err != nil {
				d.fail(n, path, "%v", err)
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		switch s {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n, path, "want true or false, got %q", s)
		}
	case reflect.Int:
		s, ok := d.scalar(n, path, "a whole number")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			d.fail(n, path, "want a whole number, got %q", s)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, ok := d.scalar(n, path, "a number")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n, path, "want a number, got %q", s)
			return
		}
		v.SetFloat(f)
	default:
		panic("config: unsupported field type " + v.Type().String())
	}
}

func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want %s, got %s", want, kindName(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, `a duration such as "250ms" or "5s"`)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
			d.fail(n, path, "a duration needs a unit: %q (for example %ss)", s, s)
			return
		}
		d.fail(n, path, "want a duration such as \"250ms\" or \"5s\", got %q", s)
		return
	}
	if dur < 0 {
		d.fail(n, path, "a duration cannot be negative, got %q", s)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	fields := map[string]int{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if name := yamlName(t.Field(i)); name != "" {
			fields[name] = i
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		sub := join(path, k.Value)
		idx, ok := fields[k.Value]
		switch {
		case !ok:
			d.fail(k, sub, "unknown field; known fields here: %s", knownNames(fields))
		case seen[k.Value]:
			d.fail(k, sub, "field given twice")
		default:
			seen[k.Value] = true
			d.decode(val, v.Field(idx), sub)
		}
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		sub := path + "." + k.Value
		key := reflect.ValueOf(k.Value)
		if v.MapIndex(key).IsValid() {
			d.fail(k, sub, "key given twice")
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, sub)
		v.SetMapIndex(key, elem)
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func knownNames(fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}
