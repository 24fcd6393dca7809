package cluster_test

import (
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// breakerConf returns circuitbreaker.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a circuitbreaker.Config.
func breakerConf(edit func(*circuitbreaker.Config)) circuitbreaker.Config {
	c := circuitbreaker.DefaultConfig()
	edit(&c)
	return c
}

// clusterConf returns the pods' cluster settings — cluster.DefaultConfig()
// in namespace "test", a sync every interval — with edits applied, as an
// option: the tests' way to set a few fields of a cluster.Config.
func clusterConf(edits ...func(*cluster.Config)) cluster.Option {
	c := cluster.DefaultConfig()
	c.Namespace, c.SyncInterval = "test", interval
	for _, e := range edits {
		e(&c)
	}
	return cluster.WithConfig(c)
}

// decideOn is clusterConf with DecideOn d.
func decideOn(d cluster.DecideOn) cluster.Option {
	return clusterConf(func(c *cluster.Config) { c.DecideOn = d })
}
