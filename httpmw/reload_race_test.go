package httpmw

import (
	"sync"
	"testing"
)

// Two reloads at once leave the router of the configuration in force: the
// router of the one whose engine reload came last. Each Reload built its
// router, reloaded the engine, then stored the router, so the first
// reload's router could land after the second's, and the chain matched
// requests against routes of a configuration no longer in force (a route
// the new one added ran with its host's entry) until the next reload. The
// interleaving is narrow: -race shows it within a few thousand rounds.
func TestConcurrentReloadsLeaveTheRouterOfTheConfigInForce(t *testing.T) {
	cfgs := make([]*Config, 2)
	for i, doc := range []string{"hosts: { a.example: {} }\n", "hosts: { b.example: {} }\n"} {
		cfg, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	c, err := New(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5000 {
		var wg sync.WaitGroup
		for _, cfg := range cfgs {
			wg.Go(func() {
				if err := c.Reload(cfg); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for host := range c.Config().Hosts {
			if c.router.Load().hosts[host] == nil {
				t.Fatalf("round %d: the configuration in force names %s, its router does not", i, host)
			}
		}
	}
}
