package grpcmw_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/redistest"
)

func TestClusterSectionErrorsNameTheirPath(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{name: "both", yaml: "cluster: {redis: {addr: 'a:1', url: 'redis://a:1'}}", want: "cluster.redis: set addr or url, not both"},
		{name: "addr", yaml: "cluster: {redis: {addr: 'nohost'}}", want: `cluster.redis.addr: want host:port such as 127.0.0.1:6379, got "nohost"`},
		{name: "url", yaml: "cluster: {redis: {url: 'http://u:secret@h:1'}}", want: "cluster.redis.url: want redis://"},
		{name: "interval", yaml: "cluster: {redis: {addr: 'a:1'}, syncInterval: 1ms}", want: "cluster.syncInterval: must be in [10ms, 1h0m0s], got 1ms"},
		{name: "decideOn", yaml: "cluster: {redis: {addr: 'a:1'}, decideOn: both}", want: `cluster.decideOn: must be local, cluster or either, got "both"`},
		{name: "namespace", yaml: "cluster: {redis: {addr: 'a:1'}, namespace: ''}", want: "cluster.namespace: must not be empty"},
		{name: "unknown", yaml: "cluster: {redis: {host: 'a'}}", want: "cluster.redis.host: unknown key (known here: addr, url)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcmw.ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseConfig: %v\nwant it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error shows the URL's password: %v", err)
			}
		})
	}
	cfg, err := grpcmw.ParseConfig([]byte("cluster: {namespace: x}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grpcmw.New(cfg); err == nil || !strings.Contains(err.Error(), "cluster.redis: needs addr or url") {
		t.Fatalf("New without redis: %v", err)
	}
	for _, url := range []string{"redis://u:p@h:1/0", "rediss://h:6380", "unix:///run/redis.sock?db=1", "redis://[::1]:6379/0"} {
		if _, err := grpcmw.ParseConfig([]byte("cluster: {enabled: false, decideOn: CLUSTER, redis: {url: '" + url + "'}}")); err != nil {
			t.Fatalf("a valid section: %v", err)
		}
	}
}

func TestClusterReload(t *testing.T) {
	srv, be := redistest.Start(t), newBackend(t)
	yaml := yamlFor(srv)
	pods := threePods(t, yaml, be)
	a, b := pods[0], pods[1]
	be.answer(codes.OK)
	a.calls(t, 1, codes.OK)
	b.calls(t, 1, codes.OK)

	changed, err := grpcmw.ParseConfig([]byte(strings.Replace(yaml, "namespace: three-pods", "namespace: other", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.chain.Reload(changed); err == nil || !strings.Contains(err.Error(), "the cluster section is read when the chain is built") {
		t.Fatalf("Reload changing the cluster section: %v", err)
	}
	// A new window means a new breaker: it joins the cluster in place of
	// the old one.
	bigger, err := grpcmw.ParseConfig([]byte(strings.Replace(yaml, "slidingWindowSize: 10", "slidingWindowSize: 12", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.chain.Reload(bigger); err != nil {
		t.Fatal(err)
	}
	be.answer(codes.Unavailable)
	a.calls(t, 6, codes.Unavailable)
	if a.state() != circuitbreaker.StateOpen {
		t.Fatalf("A is %v", a.state())
	}
	a.sync(t)
	b.sync(t)
	b.wantRejected(t, be)
}

// No Redis password is ever shown, whichever key the address came
// through, however malformed.
func TestClusterRedisAddressesAreRedacted(t *testing.T) {
	for _, tt := range []struct {
		name, key, value string
	}{
		{name: "url in addr", key: "addr", value: "redis://:s3cr3t-pw@h:6379"},
		{name: "user and password in addr", key: "addr", value: "user:s3cr3t-pw@h:6379"},
		{name: "password in addr", key: "addr", value: "s3cr3t-pw@h:6379"},
		{name: "colon password in addr", key: "addr", value: ":s3cr3t-pw@h:6379"},
		{name: "http url", key: "url", value: "http://u:s3cr3t-pw@h:1"},
		{name: "bad database", key: "url", value: "redis://:s3cr3t-pw@h:1/notadb"},
		{name: "bad port", key: "url", value: "redis://u:s3cr3t-pw@h:99999999/0"},
		{name: "slash in password", key: "url", value: "redis://u:s3cr3t/pw@h:1/0"},
		{name: "unknown option", key: "url", value: "redis://u:s3cr3t-pw@h:1/0?bogus=1"},
		{name: "malformed host", key: "url", value: "redis://u:s3cr3t-pw@[::1/0"},
		{name: "control byte", key: "url", value: "redis://u:s3cr3t-pw\t@h:1/0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "cluster: {redis: {" + tt.key + ": \"" + tt.value + "\"}}"
			_, err := grpcmw.ParseConfig([]byte(yaml))
			if err == nil {
				t.Fatalf("ParseConfig accepted %s: %q", tt.key, tt.value)
			}
			if !strings.Contains(err.Error(), "cluster.redis."+tt.key) {
				t.Errorf("the error does not name cluster.redis.%s: %v", tt.key, err)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
