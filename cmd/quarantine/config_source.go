package main

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/quarantine-dev/quarantine"
)

// configSource remembers where each configuration value came from, so
// that an error names the key and the place to fix it: the file and line,
// the environment variable or the flag.
type configSource struct {
	file   string
	tree   *ast.File         // the parsed file, for line numbers; nil without a file
	origin map[string]string // key -> the variable or flag that set it last
}

// parse keeps the file's syntax tree for line lookups (duplicate keys
// allowed, so that the decoder's error about them can be placed). A file
// that does not parse is reported by the decoder; the tree is then missing.
func (s *configSource) parse(data []byte) {
	if f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey()); err == nil {
		s.tree = f
	}
}

// errorf returns an EINVALID error for key, prefixed by where it was set.
func (s *configSource) errorf(key, format string, args ...any) error {
	return &quarantine.Error{
		Code:    quarantine.EINVALID,
		Field:   key,
		Message: s.where(key) + ": " + fmt.Sprintf(format, args...),
	}
}

// where names the place that set key: "--listen (listen)",
// "QUARANTINE_LISTEN (listen)", "FILE:LINE: key", or the key alone.
func (s *configSource) where(key string) string {
	if o, ok := s.origin[key]; ok {
		return o + " (" + key + ")"
	}
	if s.file == "" {
		return key
	}
	if line := s.line(key); line > 0 {
		return fmt.Sprintf("%s:%d: %s", s.file, line, key)
	}
	return s.file + ": " + key
}

// line returns the line of key (a path such as owners[1].queues[0]) in
// the file, or 0 when the file does not set it.
func (s *configSource) line(key string) int {
	if s.tree == nil {
		return 0
	}
	p, err := yaml.PathString("$." + key)
	if err != nil {
		return 0
	}
	n, err := p.FilterFile(s.tree)
	if err != nil || n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// yamlError turns a decoding error into one naming the key and its line.
func (s *configSource) yamlError(err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return &quarantine.Error{Code: quarantine.EINVALID, Field: "config",
			Message: fmt.Sprintf("%s: not valid YAML", s.file), Err: err}
	}
	tk := ye.GetToken()
	at := fmt.Sprintf("%s:%d", s.file, tk.Position.Line)
	key := s.pathAt(tk)
	var (
		unknown *yaml.UnknownFieldError
		typ     *yaml.TypeError
		node    *yaml.UnexpectedNodeTypeError
		msg     string
	)
	switch {
	case errors.As(err, &unknown):
		msg = fmt.Sprintf("unknown key %q", tk.Value)
		if i := strings.LastIndex(key, "."); i > 0 {
			msg += " in " + key[:i]
		}
	case errors.As(err, &typ):
		msg = "expected " + kindName(typ.DstType)
	case errors.As(err, &node):
		msg = fmt.Sprintf("expected a %s, found a %s", nodeName(node.Expected), nodeName(node.Actual))
	default:
		msg = ye.GetMessage()
	}
	if key == "" {
		return &quarantine.Error{Code: quarantine.EINVALID, Message: at + ": " + msg}
	}
	return &quarantine.Error{Code: quarantine.EINVALID, Field: key, Message: at + ": " + key + ": " + msg}
}

// pathAt returns the key path (limits.max_body_bytes, owners[0].queues[1])
// of the deepest node starting at tk's position, or "".
func (s *configSource) pathAt(tk *token.Token) string {
	if s.tree == nil {
		return ""
	}
	f := &pathFinder{line: tk.Position.Line, col: tk.Position.Column}
	for _, d := range s.tree.Docs {
		ast.Walk(f, d)
	}
	return strings.TrimPrefix(strings.TrimPrefix(f.path, "$"), ".")
}

type pathFinder struct {
	line, col int
	path      string
}

func (f *pathFinder) Visit(n ast.Node) ast.Visitor {
	if n == nil {
		return nil
	}
	if tk := n.GetToken(); tk != nil && tk.Position.Line == f.line && tk.Position.Column == f.col {
		f.path = n.GetPath()
	}
	return f
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "an integer"
	}
	return "a " + t.Kind().String()
}

func nodeName(t ast.NodeType) string {
	switch t {
	case ast.MappingType, ast.MappingValueType:
		return "mapping"
	case ast.SequenceType:
		return "list"
	case ast.StringType:
		return "string"
	case ast.IntegerType:
		return "integer"
	case ast.NullType:
		return "null"
	}
	return strings.ToLower(t.String())
}
