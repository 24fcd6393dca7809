package grpcmw

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/resilience"
)

// ClusterSection is the cluster section: the client's breakers share their
// decisions with the other instances of the client through Redis
// (docs/cluster.md). Nothing of it is on a call's path.
type ClusterSection struct {
	Enabled *bool         `yaml:"enabled,omitempty"`
	Redis   *RedisSection `yaml:"redis,omitempty"`
	// Namespace prefixes every key and the channel; every instance of one
	// client uses the same. Default "meshless".
	Namespace *string `yaml:"namespace,omitempty"`
	// SyncInterval is how often an instance publishes its windows and reads
	// the cluster's. Default 1s.
	SyncInterval *Duration `yaml:"syncInterval,omitempty"`
	// DecideOn is local, cluster or either: which rates may open a breaker.
	// Default either.
	DecideOn *string `yaml:"decideOn,omitempty"`
}

// RedisSection is cluster.redis: where Redis is, as host:port (addr) or as a
// URL (url: redis://[user:password@]host:port/db, rediss:// for TLS), one of
// the two. [WithRedisClient] gives a client built in Go instead.
type RedisSection struct {
	Addr *string `yaml:"addr,omitempty"`
	URL  *string `yaml:"url,omitempty"`
}

// clusterConfig maps the cluster section onto cluster.Config; ok is false
// when the section is absent or switched off.
func (c *Config) clusterConfig() (cfg cluster.Config, ok bool, err error) {
	s := c.Cluster
	if s == nil || (s.Enabled != nil && !*s.Enabled) {
		return cfg, false, nil
	}
	cfg = cluster.DefaultConfig()
	set(&cfg.Namespace, s.Namespace)
	if s.SyncInterval != nil {
		cfg.SyncInterval = s.SyncInterval.D()
	}
	var errs []error
	if s.DecideOn != nil {
		d, derr := cluster.ParseDecideOn(*s.DecideOn)
		cfg.DecideOn = d
		errs = append(errs, derr)
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, true, err
	}
	return cfg, true, cfg.Validate()
}

// redisOptions reads cluster.redis; nil options without either key.
func (s *RedisSection) options() (*redis.Options, error) {
	if s == nil || (s.Addr == nil && s.URL == nil) {
		return nil, nil
	}
	if s.Addr != nil && s.URL != nil {
		return nil, &PathError{Path: "cluster.redis", Problem: "set addr or url, not both"}
	}
	if s.Addr != nil {
		if _, _, err := net.SplitHostPort(*s.Addr); err != nil || *s.Addr == "" {
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379, got %q", clip(*s.Addr))}
		}
		return &redis.Options{Addr: *s.Addr}, nil
	}
	o, err := redis.ParseURL(*s.URL)
	if err != nil {
		// The URL may hold a password: name the problem, not the value.
		return nil, &PathError{Path: "cluster.redis.url", Problem: "want redis://[user:password@]host:port/db: " + redactURL(err.Error(), *s.URL)}
	}
	return o, nil
}

func redactURL(msg, url string) string {
	if url == "" {
		return msg
	}
	return strings.ReplaceAll(msg, url, "<url>")
}

// checkCluster validates the cluster section.
func (c *Config) checkCluster(add func(path, problem string)) {
	if c.Cluster == nil {
		return
	}
	if _, err := c.Cluster.Redis.options(); err != nil {
		var pe *PathError
		if errors.As(err, &pe) {
			add(pe.Path, pe.Problem)
		}
	}
	_, _, err := c.clusterConfig()
	for _, e := range unjoin(err) {
		var oe *resilience.OptionError
		if errors.As(e, &oe) {
			add("cluster."+oe.Option, oe.Problem+", got "+formatValue(oe.Value))
		} else if e != nil {
			add("cluster", e.Error())
		}
	}
}

var errClusterReload = errors.New("the cluster section is read when the chain is built: build a new chain to change it")

// startCluster builds and starts the chain's cluster when the configuration
// has one. Called by New.
func (c *Chain) startCluster(cfg *Config) error {
	ccfg, on, err := cfg.clusterConfig()
	if err != nil || !on || c.opts.serverSide {
		return err
	}
	rdb := c.opts.redis
	if rdb == nil {
		ro, err := cfg.Cluster.Redis.options()
		if err != nil {
			return err
		}
		if ro == nil {
			return fmt.Errorf("grpcmw: %w", &PathError{Path: "cluster.redis", Problem: "needs addr or url (or a client given with grpcmw.WithRedisClient)"})
		}
		// Each exchange is bounded by the cluster's timeout: the client gives
		// up then too, instead of waiting for its default 3 s read timeout.
		t := ccfg.Timeout
		if t <= 0 {
			t = min(ccfg.SyncInterval/2, time.Second)
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = t, t, t
		ro.ContextTimeoutEnabled = true
		c.ownRedis = redis.NewClient(ro)
		rdb = c.ownRedis
	}
	opts := []cluster.Option{cluster.WithConfig(ccfg), cluster.WithClock(c.opts.clock)}
	if c.opts.clusterListener != nil {
		opts = append(opts, cluster.WithListener(c.opts.clusterListener))
	}
	cl, err := cluster.New(rdb, opts...)
	if err != nil {
		if c.ownRedis != nil {
			_ = c.ownRedis.Close()
		}
		return fmt.Errorf("grpcmw: cluster: %w", err)
	}
	c.cluster = cl
	cl.Start()
	return nil
}

// sameCluster reports whether a and b configure the same cluster.
func sameCluster(a, b *Config) bool {
	ac, aon, _ := a.clusterConfig()
	bc, bon, _ := b.clusterConfig()
	if aon != bon || (aon && ac != bc) {
		return false
	}
	if !aon {
		return true
	}
	ar, br := a.Cluster.Redis, b.Cluster.Redis
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	addr := func(r *RedisSection) (string, string) {
		if r == nil {
			return "", ""
		}
		return str(r.Addr), str(r.URL)
	}
	a1, a2 := addr(ar)
	b1, b2 := addr(br)
	return a1 == b1 && a2 == b2
}

// Cluster returns the chain's cluster, or nil when its configuration has no
// cluster section (or a Server's chain).
func (c *Chain) Cluster() *cluster.Cluster { return c.cluster }
