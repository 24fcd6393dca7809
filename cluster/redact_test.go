package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
)

func TestRedactHidesPasswordsOfURLs(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{in: "dial redis://:s3cr3t@h:6379 refused", want: "dial redis://:xxxxx@h:6379 refused"},
		{in: `"rediss://user:s3cr3t@h:6380/0"`, want: `"rediss://user:xxxxx@h:6380/0"`},
		{in: "redis://user@h:1 and redis://u:p:s3cr3t@h:2", want: "redis://user@h:1 and redis://u:xxxxx@h:2"},
		{in: "redis://u:s3c@r3t@h:1/0?x=1", want: "redis://u:xxxxx@h:1/0?x=1"},
		{in: "no URL: 127.0.0.1:6379", want: "no URL: 127.0.0.1:6379"},
		{in: "dns:///payments:443", want: "dns:///payments:443"},
		// A password with a reserved character, not percent-encoded: the
		// URL is invalid, and the parser's error shows it.
		{in: `-redis "redis://u:p/ss@h:1": parse "redis://u:p/ss@h:1": invalid port ":p" after host`,
			want: `-redis "redis://u:xxxxx@h:1": parse "redis://u:xxxxx@h:1": invalid port ":p" after host`},
		{in: "redis://u:a#b?c@h:1/0", want: "redis://u:xxxxx@h:1/0"},
		{in: "dns:///user:s3cr3t@host", want: "dns:///user:xxxxx@host"},
		{in: "redis://h:1/0,redis://u:s3cr3t@h:2", want: "redis://h:1/0,redis://u:xxxxx@h:2"},
	} {
		if got := cluster.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// failing is a go-redis hook that fails every exchange with an error that
// names a URL and its password, as a proxy or wrapper might.
type failing struct{}

var errLeaky = errors.New("cannot reach redis://admin:s3cr3t@10.0.0.5:6379/0")

func (failing) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failing) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { return errLeaky }
}
func (failing) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			c.SetErr(errLeaky)
		}
		return errLeaky
	}
}

func TestNoPasswordInTheClustersErrorsAndLogs(t *testing.T) {
	w := newWorld(t)
	var logs bytes.Buffer
	a := w.pod("a", false, cluster.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	a.rdb.AddHook(failing{})
	err := a.c.Sync(t.Context())
	if !errors.Is(err, errLeaky) {
		t.Fatalf("Sync: %v, want the client's error (errors.Is)", err)
	}
	for what, s := range map[string]string{"Sync's error": err.Error(), "the log": logs.String()} {
		if strings.Contains(s, "s3cr3t") || !strings.Contains(s, "redis://admin:xxxxx@10.0.0.5:6379/0") {
			t.Errorf("%s: %q; want the URL with its password hidden", what, s)
		}
	}
}
