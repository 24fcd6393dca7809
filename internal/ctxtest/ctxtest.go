package ctxtest

import (
	"context"
	"sync"
)

// Ending is a context without a deadline whose deadline the test makes
// pass, at an instant of its choosing: Done closes and Err is
// context.DeadlineExceeded once End ran, and the contexts derived from it
// end with it, before End returns, as those of a context's deadline do (it
// has an AfterFunc, which the context package calls instead of watching
// Done on a goroutine of its own).
type Ending struct {
	context.Context
	mu    sync.Mutex
	done  chan struct{}
	after []func()
}

// NewEnding returns an Ending context that has not ended.
func NewEnding() *Ending {
	return &Ending{Context: context.Background(), done: make(chan struct{})}
}

// End ends c: Done closes, Err is context.DeadlineExceeded, and the
// functions AfterFunc registered run, before End returns.
func (c *Ending) End() {
	c.mu.Lock()
	close(c.done)
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, f := range after {
		if f != nil {
			f()
		}
	}
}

// Done is closed once c ended.
func (c *Ending) Done() <-chan struct{} { return c.done }

// Err is context.DeadlineExceeded once c ended, else nil.
func (c *Ending) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// AfterFunc runs f once c ended: at once when it has.
func (c *Ending) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	default:
	}
	i := len(c.after)
	c.after = append(c.after, f)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i < len(c.after) && c.after[i] != nil {
			c.after[i] = nil
			return true
		}
		return false
	}
}
