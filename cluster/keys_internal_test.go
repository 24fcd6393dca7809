package cluster

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Two configurations never write one key: whatever the namespaces (that
// validate), breaker names and instance IDs, the keys of one (its window
// hashes, open records, probe counts and presence key) are none of
// another's. Before, a namespace and a breaker name were joined with the
// key's own separators, and could be cut the other way: namespace "a:w"
// with breaker "b" and namespace "a" with breaker "w:b" both wrote the
// window hash "a:w:w:b", so that one client's failures opened the other's
// breaker, which the namespace is there to prevent. The names and IDs stay
// as they are in keys (an HTTP breaker is named "host:port"); the
// namespaces that could be cut another way are refused.
func TestNoTwoConfigurationsShareAKey(t *testing.T) {
	namespaces := []string{
		"a", "a:b", "a:w", "a:open", "a:probes", "a:alive", "a:w:x", "a:open:x", "a:probes:x",
		"a:alive:x", "a:probes:w", "a:", "a::w", "meshless@dns:///payments:443", "a:W", "a:wx", "a:events",
	}
	names := []string{
		"", "b", "c", "b:c", "w:b", "open:b", "probes:b", "alive:b", "x:w:b", "x:open:b", "w", "open",
		"probes", "alive", "1733000000000", "x:1733000000000", "w:1733000000000", "{b}", "api.example:8443",
	}
	instances := []string{"i", "w:b", "x:alive:i", "b", "1733000000000"}
	rounds := []int64{1733000000000, 5}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	owner := map[string]string{}
	put := func(key, who string) {
		t.Helper()
		if prev, ok := owner[key]; ok && prev != who {
			t.Errorf("key %q is %s and %s", key, prev, who)
			return
		}
		owner[key] = who
	}
	for _, ns := range namespaces {
		cfg := DefaultConfig()
		cfg.Namespace = ns
		if cfg.Validate() != nil {
			continue
		}
		for _, inst := range instances {
			c, err := New(rdb, WithConfig(cfg), WithInstanceID(inst))
			if err != nil {
				t.Fatal(err)
			}
			put(c.alive, "the presence key of "+inst+" in "+strconv.Quote(ns))
		}
		c, err := New(rdb, WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			of := " of " + strconv.Quote(name) + " in " + strconv.Quote(ns)
			put(c.windowKey(keyName(name)), "the window"+of)
			put(c.openKey(keyName(name)), "the open record"+of)
			for _, r := range rounds {
				put(c.probesKey(keyName(name), r), "the probes of round "+strconv.FormatInt(r, 10)+of)
			}
		}
	}
}
