// Package yamlscan follows the block structure of a YAML document by its
// indentation, to find where a syntax error really is: the YAML parser
// reports the line where the enclosing block started, not where it went
// wrong. It finds the two usual mistakes itself — a tab in the
// indentation, and a key that lines up with no key above it — and the path
// of the key on a given line. Package config turns what it finds into
// errors with a path and a line.
package yamlscan
