package cluster

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
)

// Anything read from the namespace may have been written by anyone with
// access to it: a key of the wrong type, garbage, dates in the future, counts
// no window holds, opens no instance would write. This file bounds it. A bad
// key is that key's problem, repaired (deleted or overwritten) in the same
// sync; Redis is down for the cluster only when it does not answer or refuses
// service.

// keyProblem reports whether err is the server's reply about what one key
// holds, rather than Redis not answering (network errors, timeouts) or
// refusing service (LOADING, READONLY, OOM, NOAUTH, NOPERM, BUSY,
// CLUSTERDOWN, MASTERDOWN, MISCONF, …), which mean Redis is down for the
// cluster. The key's problems are the wrong type (WRONGTYPE) and a command or
// one of the scripts failing on the key's value (ERR … not an integer,
// overflow, a script's runtime error).
func keyProblem(err error) bool {
	var re redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return false
	}
	code, rest, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "WRONGTYPE":
		return true
	case "ERR":
		if scriptRefused(rest) {
			return false
		}
		return strings.Contains(rest, "not an integer") || strings.Contains(rest, "overflow") ||
			strings.Contains(rest, "user_script")
	}
	return false
}

// scriptRefused reports whether rest, the text of an ERR reply, is a
// refusal that a script met, as Redis before 7.0 words it: "Error running
// script (call to f_…): @user_script:1: @user_script: 1: -OOM command not
// allowed …" (or -READONLY, -NOREPLICAS, -MASTERDOWN, …, with the dash of
// the reply). Redis 7 replies with the refusal's own code instead. A
// command's reply about the key (WRONGTYPE, ERR … not an integer) comes
// without the dash.
func scriptRefused(rest string) bool {
	i := strings.LastIndex(rest, ": -")
	if i < 0 || !strings.Contains(rest[:i], "user_script") {
		return false
	}
	code, _, _ := strings.Cut(rest[i+3:], " ")
	if code == "" || code == "ERR" || code == "WRONGTYPE" {
		return false
	}
	for _, r := range code {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// redisDown returns the first error of an exchange that is Redis's and not
// one key's: cmds are the pipeline's commands, err what the pipeline
// returned.
func redisDown(cmds []redis.Cmder, err error) error {
	for _, cmd := range cmds {
		if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && !keyProblem(e) {
			return e
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) && !keyProblem(err) {
		return err
	}
	return nil
}

// repair is one key to put right; see repairKey.
type repair struct {
	key, want, found, put string
	px                    int64
	why                   string
	far                   bool // an open past this instance's longest wait, not garbage
}

// repairs runs the repairs an exchange found, each a conditional script on
// its key. A key problem in a repair is ignored (the next sync finds the key
// again); any other error means Redis is down. Called with syncMu held.
func (c *Cluster) repairs(ctx context.Context, list []repair) error {
	for _, r := range list {
		n, err := repairKey.Run(ctx, c.rdb, []string{r.key}, r.want, r.found, r.put, max(r.px, 1), MaxInstances).Int()
		switch {
		case err == nil && n == 1:
			c.logRepair(r)
		case err != nil && !keyProblem(err):
			return err
		}
	}
	return nil
}

// logRepair logs the first repair as a warning (a namespace holding what no
// instance writes has another writer; an open past the longest wait, a pod
// whose clock runs ahead or whose wait is longer), and the others at debug
// level.
func (c *Cluster) logRepair(r repair) {
	level := slog.LevelDebug
	if c.repaired.CompareAndSwap(false, true) {
		level = slog.LevelWarn
	}
	msg := "meshless cluster: repaired a key of the namespace that held what no instance writes; further repairs are logged at debug level"
	if r.far {
		msg = "meshless cluster: repaired an open record ending past this pod's longest open wait (written by a pod whose clock runs ahead of this one's or whose open wait is longer, or by another writer); further repairs are logged at debug level"
	}
	c.o.logger.Log(context.Background(), level, msg, "namespace", c.ns, "key", r.key, "problem", r.why)
}

// claimed reads claimOpen's reply: the record in force, and what the claim
// replaced: 1 what no instance writes, 2 an open past the longest wait,
// else 0.
func claimed(res []any) (v string, replaced int64) {
	if len(res) != 2 {
		return "", 0
	}
	v, _ = res[0].(string)
	replaced, _ = res[1].(int64)
	return v, replaced
}

// longestWait is the longest open wait cfg's breaker sets itself: an open
// adopted from another instance ends no later than this from now.
func longestWait(cfg circuitbreaker.Config) time.Duration {
	if cfg.MaxWaitDurationInOpenState > 0 {
		return cfg.MaxWaitDurationInOpenState
	}
	return time.Duration(math.Ceil(float64(cfg.WaitDurationInOpenState) * (1 + cfg.OpenStateJitter)))
}

// skew is the clock difference between instances the cluster tolerates:
// one sync interval. Windows dated further ahead are ignored and deleted;
// opens ending further past the reader's longest wait are rewritten.
func (c *Cluster) skew() int64 { return c.o.SyncInterval.Milliseconds() }

// peerCap is the most calls one other instance's window counts for, in the
// cluster's sum of cfg's breaker whose own window holds own calls. A
// COUNT_BASED window holds slidingWindowSize calls. A TIME_BASED window has
// no size in calls: a peer weighs at most as much as this instance's own
// window, or minimumNumberOfCalls when that is more (so that a quiet
// instance still sums its peers up to a decision).
func peerCap(cfg circuitbreaker.Config, own int64) int64 {
	if cfg.SlidingWindowType == circuitbreaker.CountBased {
		return int64(cfg.SlidingWindowSize)
	}
	return max(own, int64(cfg.MinimumNumberOfCalls))
}

// capped bounds a's calls at limit, scaling its failures and slow calls
// with them so that its rates are kept.
func capped(a aggregate, limit int64) aggregate {
	if a.calls <= limit {
		return a
	}
	scale := float64(limit) / float64(a.calls)
	a.failures = min(int64(math.Round(float64(a.failures)*scale)), limit)
	a.slow = min(int64(math.Round(float64(a.slow)*scale)), limit)
	a.calls = limit
	return a
}

// redactedError is an error whose text hides the credentials of any URL in
// it; errors.Is and errors.As see the original.
type redactedError struct{ err error }

func (e *redactedError) Error() string { return Redact(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

func redacted(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err}
}

// Redact returns s with the password of every URL in it
// (scheme://user:password@host) replaced by "xxxxx", as
// [net/url.URL.Redacted] does, and the user kept. The cluster applies it
// to every error it returns or logs; grpcmw to the Redis addresses its
// configuration errors show.
//
// A password with a "/", "?" or "#" that is not percent-encoded makes a
// URL invalid, and the parser's error shows it whole: an "@" after such
// a character, before the end of the word (a space or a quote) and the
// next URL, is taken to end the user information too, so that such a
// password is hidden as well; a query's "@" may then hide a little more
// than the password.
func Redact(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			break
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		word := strings.IndexAny(s, " \t\r\n\"'`<>")
		if word < 0 {
			word = len(s)
		}
		if next := strings.Index(s[:word], "://"); next >= 0 {
			word = next
		}
		end := strings.IndexAny(s[:word], "/?#")
		if end < 0 {
			end = word
		}
		at := strings.LastIndex(s[:end], "@")
		if at < 0 { // not in the authority: a password with a "/", "?" or "#"
			at = strings.LastIndex(s[:word], "@")
		}
		if at < 0 {
			continue
		}
		user, _, hasPassword := strings.Cut(s[:at], ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":xxxxx")
		}
		s = s[at:]
	}
	b.WriteString(s)
	return b.String()
}
