package yamlscan

import (
	"fmt"
	"strconv"
	"strings"
)

// Problem is an indentation mistake: the path of the key it is at (""
// at the root), its line, and what is wrong.
type Problem struct {
	Path    string
	Line    int
	Message string
}

// Result is what Scan found: the first indentation problem, or the path of
// the key on the line it stopped at.
type Result struct {
	Problem *Problem
	Path    string
}

// Scan follows the block structure of data by its indentation, up to line
// stop (0: the end), and reports the first tab in an indentation and the
// first key that lines up with no enclosing key. It gives up, quietly, on
// what it does not follow. join appends a key to a path, clip shortens a
// key for a message: the caller's way of writing them.
func Scan(data []byte, stop int, join func(path, key string) string, clip func(string) string) Result {
	type level struct {
		indent int
		key    string // "" for a list item
	}
	var stack []level
	pathOf := func(key string) string {
		p := ""
		for _, l := range stack {
			if l.key != "" {
				p = join(p, l.key)
			}
		}
		if key != "" {
			p = join(p, key)
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
			return Result{}
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
			return Result{Problem: &Problem{Path: pathOf(key), Line: ln, Message: "indentation uses a tab; YAML needs spaces"}}
		}
		ind := len(lead)
		above := stack // the levels before the dedent, for the message below only
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
				what = strconv.Quote(clip(key))
			}
			indents := make([]string, 0, len(above))
			for _, l := range above {
				indents = append(indents, strconv.Itoa(l.indent))
			}
			return Result{Problem: &Problem{Path: pathOf(key), Line: ln, Message: fmt.Sprintf(
				"%s is indented %d spaces, which lines up with no key above it (they are indented %s); mind the indentation", what, ind, strings.Join(indents, ", "))}}
		case !dedented && ind > top && !opened && top >= 0:
			return Result{} // a continued scalar, or a mistake the parser reports well
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
			return Result{Path: pathOf(key)}
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
	return Result{}
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
