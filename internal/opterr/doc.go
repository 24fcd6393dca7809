// Package opterr collects the problems found in a policy's options, so that
// a constructor reports all of them at once.
package opterr
