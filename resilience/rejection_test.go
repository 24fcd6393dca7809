package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

type rejected struct{}

func (rejected) Error() string               { return "rejected" }
func (rejected) RejectedBy() resilience.Kind { return resilience.KindBulkhead }

func TestIsRejectionFollowsWrapping(t *testing.T) {
	base := rejected{}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "plain error", err: errors.New("x"), want: false},
		{name: "the rejection", err: base, want: true},
		{name: "wrapped with %w", err: fmt.Errorf("call: %w", base), want: true},
		{name: "wrapped twice", err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", base)), want: true},
		{name: "joined", err: errors.Join(errors.New("x"), base), want: true},
		{name: "joined without", err: errors.Join(errors.New("x"), errors.New("y")), want: false},
		{name: "wrapped with %v loses it", err: fmt.Errorf("call: %v", base), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resilience.IsRejection(tt.err); got != tt.want {
				t.Fatalf("IsRejection(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	r, ok := resilience.AsRejection(fmt.Errorf("x: %w", base))
	if !ok || r.RejectedBy() != resilience.KindBulkhead {
		t.Fatalf("AsRejection = %v, %v; want the bulkhead rejection", r, ok)
	}
}

func TestIsRejectionDoesNotAllocate(t *testing.T) {
	err := fmt.Errorf("a: %w", fmt.Errorf("b: %w", rejected{}))
	if n := testing.AllocsPerRun(1000, func() { _ = resilience.IsRejection(err) }); n != 0 {
		t.Fatalf("IsRejection allocates %v times, want 0", n)
	}
}

func TestDefaultClassifier(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want resilience.Outcome
	}{
		{name: "nil", err: nil, want: resilience.Success},
		{name: "error", err: errors.New("boom"), want: resilience.Failure},
		{name: "deadline", err: context.DeadlineExceeded, want: resilience.Failure},
		{name: "cancelled", err: fmt.Errorf("x: %w", context.Canceled), want: resilience.Ignored},
		{name: "rejection", err: fmt.Errorf("x: %w", rejected{}), want: resilience.Ignored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resilience.DefaultClassifier(tt.err); got != tt.want {
				t.Fatalf("DefaultClassifier(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{resilience.Success.String(), "success"},
		{resilience.Failure.String(), "failure"},
		{resilience.Ignored.String(), "ignored"},
		{resilience.Outcome(9).String(), "Outcome(9)"},
		{resilience.KindCircuitBreaker.String(), "circuit_breaker"},
		{resilience.KindBulkhead.String(), "bulkhead"},
		{resilience.KindDeadLetter.String(), "dead_letter"},
		{resilience.Kind(42).String(), "Kind(42)"},
		{resilience.EventTransition.String(), "transition"},
		{resilience.EventRetryDone.String(), "retry_done"},
		{resilience.EventReleased.String(), "released"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestOptionErrorNamesTheOptionAndValue(t *testing.T) {
	err := error(&resilience.OptionError{Option: "failureRateThreshold", Value: 150.0, Problem: "must be in (0, 100]"})
	if got, want := err.Error(), "failureRateThreshold: must be in (0, 100], got 150"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, resilience.ErrInvalidOption) {
		t.Fatal("OptionError does not match ErrInvalidOption")
	}
	d := (&resilience.OptionError{Option: "waitDurationInOpenState", Value: -time.Second, Problem: "must be positive"}).Error()
	if !strings.Contains(d, "got -1s") {
		t.Fatalf("durations are not printed as durations: %q", d)
	}
}
