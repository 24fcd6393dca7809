package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/internal/redistest"
)

// keyProblem against the replies of a real redis-server: what one key
// holds is that key's problem; a Redis that does not answer or refuses
// service is down.
func TestKeyProblemTellsAKeyFromRedis(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer admin.Close()
	ctx := t.Context()
	admin.HSet(ctx, "h", "f", "v")
	admin.Set(ctx, "s", "abc", 0)
	admin.Set(ctx, "big", "9223372036854775807", 0)
	if err := admin.Do(ctx, "ACL", "SETUSER", "narrow", "on", ">pw", "~allowed:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	narrow := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "narrow", Password: "pw", MaxRetries: -1})
	defer narrow.Close()

	for _, tt := range []struct {
		name string
		run  func(ctx context.Context) error
		key  bool
	}{
		{name: "WRONGTYPE", key: true, run: func(ctx context.Context) error { return admin.Get(ctx, "h").Err() }},
		{name: "WRONGTYPE in a script", key: true, run: func(ctx context.Context) error {
			return admin.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"h"}).Err()
		}},
		{name: "not an integer in a script", key: true, run: func(ctx context.Context) error {
			return admin.Eval(ctx, "return redis.call('INCRBY', KEYS[1], 1)", []string{"s"}).Err()
		}},
		{name: "a script's runtime error", key: true, run: func(ctx context.Context) error {
			return admin.Eval(ctx, "return tonumber(redis.call('GET', KEYS[1])) + 1", []string{"s"}).Err()
		}},
		{name: "overflow", key: true, run: func(ctx context.Context) error { return admin.IncrBy(ctx, "big", 1).Err() }},
		{name: "nil is no error", key: false, run: func(ctx context.Context) error { return admin.Get(ctx, "absent").Err() }},
		{name: "unknown command", key: false, run: func(ctx context.Context) error { return admin.Do(ctx, "NOSUCHCOMMAND").Err() }},
		{name: "no permission (ACL)", key: false, run: func(ctx context.Context) error { return narrow.Get(ctx, "test:w:svc").Err() }},
		{name: "timeout", key: false, run: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			<-ctx.Done()
			return admin.Get(ctx, "s").Err()
		}},
		{name: "out of memory", key: false, run: func(ctx context.Context) error {
			admin.ConfigSet(ctx, "maxmemory", "1")
			defer admin.ConfigSet(ctx, "maxmemory", "0")
			return admin.Set(ctx, "x", "y", 0).Err()
		}},
		{name: "no auth", key: false, run: func(ctx context.Context) error {
			admin.ConfigSet(ctx, "requirepass", "secret")
			authed := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "secret", MaxRetries: -1})
			defer authed.Close()
			defer authed.ConfigSet(ctx, "requirepass", "")
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			defer c.Close()
			return c.Get(ctx, "s").Err()
		}},
		// Redis before 7.0 wraps a refusal met in a script in an ERR that
		// names the script, the refusal's code after a dash; a command's
		// reply about the key comes without one.
		{name: "Redis 6: out of memory in a script", key: false, run: func(context.Context) error {
			return redis6Error("ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:41: @user_script: 41: -OOM command not allowed when used memory > 'maxmemory'.")
		}},
		{name: "Redis 6: read-only in a script", key: false, run: func(context.Context) error {
			return redis6Error("ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:3: @user_script: 3: -READONLY You can't write against a read only replica.")
		}},
		{name: "Redis 6: no replicas in a script", key: false, run: func(context.Context) error {
			return redis6Error("ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:3: @user_script: 3: -NOREPLICAS Not enough good replicas to write.")
		}},
		{name: "Redis 6: WRONGTYPE in a script", key: true, run: func(context.Context) error {
			return redis6Error("ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value")
		}},
		{name: "no server", key: false, run: func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
			defer c.Close()
			return c.Get(ctx, "s").Err()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(t.Context())
			if tt.name != "nil is no error" && err == nil {
				t.Fatal("no error")
			}
			if got := keyProblem(err); got != tt.key {
				t.Fatalf("keyProblem(%v) = %v, want %v", err, got, tt.key)
			}
			if got := redisDown(nil, err) != nil; got != (err != nil && !errors.Is(err, redis.Nil) && !tt.key) {
				t.Fatalf("redisDown(%v) = %v", err, got)
			}
		})
	}
}

// redis6Error is a reply error as a Redis before 7.0 words it.
type redis6Error string

func (e redis6Error) Error() string { return string(e) }
func (redis6Error) RedisError()     {}
