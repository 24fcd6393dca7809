package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTransport is a transport whose errors carry their code as a codeError;
// a rejection is wired as itself and the attempt number is kept in the
// context.
type fakeTransport struct{}

type codeError struct {
	code    uint32
	relayed resilience.Kind
}

func (e *codeError) Error() string { return fmt.Sprint("code ", e.code) }

func (fakeTransport) Code(err error) (uint32, bool) {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code, true
	}
	return 0, false
}

func (fakeTransport) Relayed(err error) (resilience.Kind, bool) {
	var ce *codeError
	if errors.As(err, &ce) && ce.relayed != 0 {
		return ce.relayed, true
	}
	return 0, false
}

func (fakeTransport) Overloaded(err error) bool {
	c, ok := fakeTransport{}.Code(err)
	return ok && c == 8
}
func (fakeTransport) ErrorType(err error) string { return "E" }
func (fakeTransport) Rejection(err error) error  { return err }
func (fakeTransport) Final(err error) error      { return err }

type attemptsKey struct{}

func (fakeTransport) Mark(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptsKey{}, n)
}

// lookup looks a "/svc/name" key up as grpcmw does, every well-formed name
// known.
func lookup(e *Engine, key string) *Method {
	return e.Lookup(key, func(*config.Config) (string, string, bool) {
		svc, name, ok := strings.Cut(strings.TrimPrefix(key, "/"), "/")
		return svc, name, ok
	})
}
