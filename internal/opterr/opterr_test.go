package opterr_test

import (
	"errors"
	"testing"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

func TestErrorsCollectEveryProblem(t *testing.T) {
	var errs opterr.Errors
	if errs.Err() != nil {
		t.Fatal("no problems, yet an error")
	}
	errs.Add("maxAttempts", 0, "must be at least 1")
	errs.Add("jitter", 2.0, "must be in [0, 1)")
	err := errs.Err()
	if got, want := err.Error(), "maxAttempts: must be at least 1, got 0\njitter: must be in [0, 1), got 2"; got != want {
		t.Fatalf("Err() = %q, want %q", got, want)
	}
	if !errors.Is(err, resilience.ErrInvalidOption) {
		t.Fatal("the joined error does not match ErrInvalidOption")
	}
}
