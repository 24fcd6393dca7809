package yamldecode

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/meshless/meshless/internal/yamlscan"
)

// Problem is a problem found in a document: where it is (its path, "" for
// the root, and its line, 0 when not known) and what is wrong.
type Problem struct {
	Path    string
	Line    int
	Message string
}

// Read reads the one document of data; nil when there is none. Its problem
// is a syntax error, at its real line and with the path of the key there
// when they can be told, or a second document.
func Read(data []byte) (*yaml.Node, *Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &root, nil
	case err != nil:
		return nil, syntaxError(data, err)
	}
	return nil, &Problem{Line: next.Line, Message: "a second document starts here (after ---); a configuration is one document"}
}

// The YAML parser reports the line where the enclosing block started, not
// where it went wrong; internal/yamlscan finds the line (and the path) for
// the usual mistakes: a tab in the indentation and a key that lines up with
// no key above it.

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the parser's err into a Problem with the real line
// and, when it can be told, the path.
func syntaxError(data []byte, err error) *Problem {
	line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if p := yamlscan.Scan(data, 0, Join, Clip).Problem; p != nil && p.Line >= line {
		return &Problem{Path: p.Path, Line: p.Line, Message: p.Message}
	}
	return &Problem{Path: yamlscan.Scan(data, line, Join, Clip).Path, Line: line, Message: "not valid YAML: " + msg}
}
