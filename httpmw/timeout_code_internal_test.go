package httpmw

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/timeout"
)

// A timeout is a failure, whatever error it cut (docs/http.md,
// Classification): a hedged copy that ran until the deadline, but whose
// request the hedge's cancel reached before its own deadline timer (another
// copy's end at the same deadline decided the call), failed with
// context.Canceled, which the engine marks as the deadline's. Before, the
// status of such a timeout was 499, the caller's: the breaker ignored it,
// and its error type was "canceled".
func TestATimeoutThatCutACancelledRequestIsATimeout(t *testing.T) {
	for _, scope := range []timeout.Scope{timeout.Attempt, timeout.Overall} {
		err := &timeout.Error{Scope: scope, Timeout: 300 * time.Millisecond, Err: context.Canceled}
		if code, ok := (transport{}).Code(err); ok {
			t.Errorf("%v: Code = %d, want none: a timeout, a failure whatever the lists say", err, code)
		}
		if got := (transport{}).ErrorType(err); got != "timeout" {
			t.Errorf("%v: ErrorType = %q, want timeout", err, got)
		}
	}
	if code, ok := (transport{}).Code(context.Canceled); !ok || code != 499 {
		t.Errorf("the caller's cancel: Code = %d, %v; want 499", code, ok)
	}
	if got := (transport{}).ErrorType(context.Canceled); got != "canceled" {
		t.Errorf("the caller's cancel: ErrorType = %q, want canceled", got)
	}
}
