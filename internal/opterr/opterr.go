package opterr

import (
	"errors"

	"github.com/meshless/meshless/resilience"
)

// Errors collects problems as *resilience.OptionError values.
type Errors []error

// Add records that option's value is wrong and how.
func (e *Errors) Add(option string, value any, problem string) {
	*e = append(*e, &resilience.OptionError{Option: option, Value: value, Problem: problem})
}

// Err returns the problems joined, or nil when there are none.
func (e Errors) Err() error { return errors.Join(e...) }
