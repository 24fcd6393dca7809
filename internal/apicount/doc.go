// Package apicount holds the test that keeps docs/architecture.md's table
// "The public API, counted" true: it counts the exported names of each
// public package of the main module, with go/parser and go/doc, and fails
// when the table's "after" column differs. It has no code of its own.
package apicount
