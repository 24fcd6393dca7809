package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The YAML parser reports the line where the enclosing block started, not
// where it went wrong; this file finds the line (and the path) itself for
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
	if s := scanBlocks(data, 0); s.problem != nil && s.problem.Line >= line {
		return s.problem
	}
	path := scanBlocks(data, line).path
	if path == "" {
		path = rootPath
	}
	return &PathError{Path: path, Line: line, Problem: "not valid YAML: " + msg}
}

// blockScan is what scanBlocks found: the first indentation problem, or the
// path of the key on the line it stopped at.
type blockScan struct {
	problem *PathError
	path    string
}

// scanBlocks follows the block structure of a YAML document by its
// indentation, up to line stop (0: the end), and reports the first tab in
// an indentation and the first key that lines up with no enclosing key. It
// gives up, quietly, on what it does not follow.
func scanBlocks(data []byte, stop int) blockScan {
	type level struct {
		indent int
		key    string // "" for a list item
	}
	var stack []level
	pathOf := func(key string) string {
		p := ""
		for _, l := range stack {
			if l.key != "" {
				p = Join(p, l.key)
			}
		}
		if key != "" {
			p = Join(p, key)
		}
		return p
	}
	opened := false // the line before ends in "key:" or "-": a block follows
	block := -1     // in a block scalar (| or >): lines indented more than this
	flow := 0       // [ and { still open
	for i, line := range strings.Split(string(data), "\n") {
		ln := i + 1
		line = strings.TrimRight(line, "\r")
		body := strings.TrimLeft(line, " \t")
		lead := line[:len(line)-len(body)]
		spaces := len(lead) - len(strings.TrimLeft(lead, " "))
		switch {
		case block >= 0 && (body == "" || spaces > block):
			continue
		case flow > 0:
			flow += depth(body)
			continue
		case body == "" || body[0] == '#':
			continue
		case strings.HasPrefix(body, "---"), strings.HasPrefix(body, "..."), body[0] == '%':
			return blockScan{}
		}
		block = -1
		isItem := body == "-" || strings.HasPrefix(body, "- ")
		rest := body
		if isItem {
			rest = strings.TrimLeft(body[1:], " ")
		}
		key, value, isKey := splitKey(rest)
		if strings.Contains(lead, "\t") {
			parent := stack
			if !opened && len(parent) > 0 {
				parent = parent[:len(parent)-1]
			}
			stack = parent
			return blockScan{problem: &PathError{Path: orRoot(pathOf(key)), Line: ln, Problem: "indentation uses a tab; YAML needs spaces"}}
		}
		ind := len(lead)
		var indents []string
		for _, l := range stack {
			indents = append(indents, strconv.Itoa(l.indent))
		}
		dedented := false
		for len(stack) > 0 && stack[len(stack)-1].indent > ind {
			stack, dedented = stack[:len(stack)-1], true
		}
		top := -1
		if len(stack) > 0 {
			top = stack[len(stack)-1].indent
		}
		switch {
		case dedented && ind > max(top, 0):
			what := "this line"
			if isKey {
				what = strconv.Quote(Clip(key))
			}
			return blockScan{problem: &PathError{Path: orRoot(pathOf(key)), Line: ln, Problem: fmt.Sprintf(
				"%s is indented %d spaces, which lines up with no key above it (they are indented %s); mind the indentation", what, ind, strings.Join(indents, ", "))}}
		case !dedented && ind > top && !opened && top >= 0:
			return blockScan{} // a continued scalar, or a mistake the parser reports well
		}
		if !(isItem && opened) {
			for len(stack) > 0 && stack[len(stack)-1].indent == ind && (!isItem || stack[len(stack)-1].key == "") {
				stack = stack[:len(stack)-1]
			}
		}
		if isItem {
			stack = append(stack, level{indent: ind})
			ind += len(body) - len(rest)
		}
		if ln == stop {
			return blockScan{path: pathOf(key)}
		}
		opened = rest == ""
		if !isKey {
			flow = depth(rest)
			continue
		}
		stack = append(stack, level{indent: ind, key: key})
		opened = value == "" || value[0] == '#'
		switch {
		case value != "" && (value[0] == '[' || value[0] == '{'):
			flow = depth(value)
		case value != "" && (value[0] == '|' || value[0] == '>'):
			block = ind
		}
	}
	return blockScan{}
}

func orRoot(path string) string {
	if path == "" {
		return rootPath
	}
	return path
}

// splitKey splits `key: value` (the key plain or quoted) into its key and
// value.
func splitKey(s string) (key, value string, ok bool) {
	if s == "" {
		return "", "", false
	}
	end := 0
	switch s[0] {
	case '"', '\'':
		q := strings.IndexByte(s[1:], s[0])
		if q < 0 {
			return "", "", false
		}
		end = q + 2
		if s[0] == '"' {
			key, _ = strconv.Unquote(s[:end])
		} else {
			key = strings.ReplaceAll(s[1:end-1], "''", "'")
		}
		if end >= len(s) || s[end] != ':' {
			return "", "", false
		}
	case '[', '{', '#', '&', '*', '!', '|', '>':
		return "", "", false
	default:
		i := strings.Index(s, ": ")
		switch {
		case i < 0 && strings.HasSuffix(s, ":"):
			i = len(s) - 1
		case i < 0:
			return "", "", false
		}
		end, key = i, s[:i]
	}
	return key, strings.TrimSpace(s[end+1:]), true
}

// depth is how many flow collections ([ or {) s leaves open.
func depth(s string) int {
	n := 0
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#':
			return n
		case r == '[' || r == '{':
			n++
		case r == ']' || r == '}':
			n--
		}
	}
	return n
}
