package config

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/meshless/meshless/internal/yamlscan"
)

// The YAML parser reports the line where the enclosing block started, not
// where it went wrong; internal/yamlscan finds the line (and the path) for
// the usual mistakes: a tab in the indentation and a key that lines up with
// no key above it.

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the parser's err into a PathError with the real line
// and, when it can be told, the path.
func syntaxError(data []byte, err error) error {
	line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if p := yamlscan.Scan(data, 0, Join, Clip).Problem; p != nil && p.Line >= line {
		return &PathError{Path: orRoot(p.Path), Line: p.Line, Problem: p.Message}
	}
	return &PathError{Path: orRoot(yamlscan.Scan(data, line, Join, Clip).Path), Line: line, Problem: "not valid YAML: " + msg}
}

// orRoot writes the root's path for an empty one.
func orRoot(path string) string {
	if path == "" {
		return rootPath
	}
	return path
}
