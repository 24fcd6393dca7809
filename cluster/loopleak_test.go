package cluster_test

import (
	"bytes"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// syncedOnce is a Listener that says when the first sync has ended.
type syncedOnce struct{ done chan struct{} }

func (s *syncedOnce) Synced(bool) {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}
func (s *syncedOnce) Connected(bool)    {}
func (s *syncedOnce) RemoteOpen(string) {}

// startedByTheLoop returns the stacks of the goroutines the sync loop
// started that are still there.
func startedByTheLoop() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("created by github.com/meshless/meshless/cluster.(*Cluster).loop")) {
			out = append(out, string(g))
		}
	}
	return out
}

// Once Close has returned, no goroutine the sync loop started is left:
// Close waits for every goroutine of the cluster's (docs/cluster.md). The
// loop started one that cancelled its context when the cluster stopped,
// and that Close did not wait for: it outlived Close (goleak, which
// retries, let it end first). The check is made at once, with no retry.
func TestNoGoroutineOfTheLoopOutlivesClose(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // never dialled
	defer rdb.Close()
	rdb.AddHook(new(fakeRedis))
	for i := range 1000 {
		l := &syncedOnce{done: make(chan struct{})}
		c, err := cluster.New(rdb, clusterConf(), cluster.WithListener(l),
			cluster.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		b, err := circuitbreaker.New(circuitbreaker.WithName("svc"))
		if err != nil {
			t.Fatal(err)
		}
		c.Add(b)
		c.Start()
		<-l.done // the loop waits for its next sync or for Close
		c.Close()
		left := startedByTheLoop()
		b.Close()
		if len(left) > 0 {
			t.Fatalf("round %d: %d goroutines the sync loop started outlived Close:\n%s", i, len(left), left[0])
		}
	}
}
