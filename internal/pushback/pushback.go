package pushback

import "time"

// With returns an attempt's error carrying the delay the server asked for
// before the next attempt (a negative one: no more attempts). The engine
// takes it off before the caller sees the error, and ignores it on a
// relayed rejection (never retried anyway, and it moves no throttle token).
func With(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &carried{error: err, delay: d}
}

// carried is an attempt's error with a server's pushback. It is
// transparent: errors.Is and errors.As (so status.Code) see the error it
// wraps.
type carried struct {
	error
	delay time.Duration
}

func (e *carried) Unwrap() error { return e.error }

// Without returns err without the pushback it carried, if any.
func Without(err error) error {
	if c, ok := err.(*carried); ok {
		return c.error
	}
	return err
}

// Of returns the delay err carries and the error it wraps, when err is
// one [With] returned.
func Of(err error) (inner error, d time.Duration, ok bool) {
	c, ok := err.(*carried)
	if !ok {
		return err, 0, false
	}
	return c.error, c.delay, true
}
