package grpcmw

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/resilience"
)

// ClusterSection is the cluster section: the client's breakers share their
// decisions with the other instances of the client through Redis
// (docs/cluster.md). Nothing of it is on a call's path.
type ClusterSection struct {
	Enabled *bool         `yaml:"enabled,omitempty"`
	Redis   *RedisSection `yaml:"redis,omitempty"`
	// Namespace prefixes every key and the channel. Unwritten, it is
	// meshless@<target>, from the target of the chain's first call: the
	// pods of one client (same target, same configuration) share, unrelated
	// clients on the same Redis do not. Written, every client that writes
	// the same namespace shares its breakers by name, on purpose.
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

// redisOptions reads cluster.redis; nil options without either key. No
// error shows a password: an address is shown with its user information
// hidden (redactAddr), whichever key it came through.
func (s *RedisSection) options() (*redis.Options, error) {
	if s == nil || (s.Addr == nil && s.URL == nil) {
		return nil, nil
	}
	if s.Addr != nil && s.URL != nil {
		return nil, &PathError{Path: "cluster.redis", Problem: "set addr or url, not both"}
	}
	if s.Addr != nil {
		addr := *s.Addr
		switch {
		case strings.Contains(addr, "://"):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379, got a URL (%q): write it as url", clip(redactAddr(addr)))}
		case strings.ContainsAny(addr, "@/"):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379 (a user or password goes in url), got %q", clip(redactAddr(addr)))}
		case !validHostPort(addr):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379, got %q", clip(addr))}
		}
		return &redis.Options{Addr: addr}, nil
	}
	o, err := redis.ParseURL(*s.URL)
	if err == nil && o.Network != "unix" && !validHostPort(o.Addr) {
		err = fmt.Errorf("want a port in [1, 65535], got %q", o.Addr)
	}
	if err != nil {
		return nil, &PathError{Path: "cluster.redis.url", Problem: "want redis://[user:password@]host:port/db: " + urlProblem(*s.URL, err)}
	}
	return o, nil
}

func validHostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 1 && n <= 65535
}

// redactAddr hides the user information of a Redis address: a URL's
// password (user kept, as net/url's Redacted does), and everything before
// the last @ of an address that is not a URL.
func redactAddr(addr string) string {
	if strings.Contains(addr, "://") {
		return cluster.Redact(addr)
	}
	if at := strings.LastIndex(addr, "@"); at >= 0 {
		return "xxxxx" + addr[at:]
	}
	return addr
}

// urlProblem describes err, the problem with the URL raw, without raw's
// user information: the parser's message on the URL with it hidden, or,
// when that URL is valid, a message that the user information is not.
func urlProblem(raw string, err error) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return cluster.Redact(err.Error()) // no user information
	}
	hidden := scheme + "://xxxxx" + rest[at:]
	if _, herr := redis.ParseURL(hidden); herr != nil {
		return strings.ReplaceAll(herr.Error(), hidden, clip(hidden))
	}
	if o, _ := redis.ParseURL(hidden); !validHostPort(o.Addr) {
		return err.Error() // the port: raw's user information is not in it
	}
	return "its user or password is not valid in a URL (percent-encode : / ? # [ ] @ in them), in " + strconv.Quote(clip(hidden))
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

// startCluster builds the chain's cluster when the configuration has one.
// With a namespace written, it starts now: every client naming that
// namespace shares breakers by name. Left at its default, the namespace is
// derived from the target of the chain's first call ([Chain.lookupConn]),
// and the cluster starts then. Called by New.
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
	cl, err := cluster.New(rdb, opts...) // validates the settings now, whatever the namespace
	if err != nil {
		if c.ownRedis != nil {
			_ = c.ownRedis.Close()
		}
		return fmt.Errorf("grpcmw: cluster: %w", err)
	}
	if cfg.Cluster.Namespace == nil {
		cl.Close() // never started: it holds nothing
		c.bind = &clusterBinding{rdb: rdb, opts: opts, cfg: ccfg}
		return nil
	}
	c.cluster = cl
	cl.Start()
	return nil
}

// clusterBinding is the cluster of a chain whose namespace comes from its
// target: made and started on the chain's first client call.
type clusterBinding struct {
	rdb  redis.UniversalClient
	opts []cluster.Option
	cfg  cluster.Config

	bound  atomic.Bool // target is set
	target string      // the first call's target, written once before bound
	warned atomic.Bool // a call to another target was logged
	closed bool        // under Chain.mu: the chain is closed
}

// lookupConn is [Chain.lookup] for a client call on cc. Its fast path is
// lookup's: after a method's first call it reads one atomic pointer and a
// map, takes no lock and allocates nothing. A method's first call on a chain
// whose namespace comes from its target binds the cluster first.
func (c *Chain) lookupConn(fullMethod string, cc *grpc.ClientConn) *method {
	if m, ok := c.state.Load().methods.load(fullMethod); ok {
		return m
	}
	if c.bind != nil && cc != nil {
		c.bindCluster(cc.CanonicalTarget())
	}
	return c.lookup(fullMethod)
}

// bindCluster starts the chain's cluster in the namespace of target, the
// first time; every breaker the chain has joins it. Later targets change
// nothing: the first different one is logged once.
func (c *Chain) bindCluster(target string) {
	b := c.bind
	if b.bound.Load() {
		if target != b.target && b.warned.CompareAndSwap(false, true) {
			slog.Warn("meshless grpcmw: one chain calls two targets; its breakers are shared in Redis under the first target's namespace only",
				"namespace", targetNamespace(b.cfg.Namespace, b.target), "first", cluster.Redact(b.target), "other", cluster.Redact(target))
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.bound.Load() || b.closed {
		return
	}
	b.target = target
	b.bound.Store(true)
	cfg := b.cfg
	cfg.Namespace = targetNamespace(cfg.Namespace, target)
	cl, err := cluster.New(b.rdb, append(b.opts[:len(b.opts):len(b.opts)], cluster.WithNamespace(cfg.Namespace))...)
	if err != nil { // cannot happen: the settings were validated by New, the namespace is valid by construction
		slog.Error("meshless grpcmw: cluster mode is off for this chain", "error", err)
		return
	}
	for _, e := range c.state.Load().breakers {
		cl.Add(e.b)
	}
	c.cluster = cl
	cl.Start()
}

// closeCluster closes the chain's cluster and the Redis client it dialled.
// Called with c.mu held.
func (c *Chain) closeCluster() {
	if c.bind != nil {
		c.bind.closed = true
	}
	if c.cluster != nil {
		c.cluster.Close() // first: it stops touching the breakers
	}
	if c.ownRedis != nil {
		_ = c.ownRedis.Close()
	}
}

// maxScope bounds the target's part of a derived namespace.
const maxScope = 64

// targetNamespace is the namespace of a chain whose namespace is left at
// its default prefix: prefix@target. A target longer than maxScope bytes,
// or with a byte other than a letter, a digit or one of ._-:/[], is kept
// readable up to 40 bytes (without user information, unsafe bytes as _)
// and made unique by 16 hex digits of its SHA-256: at most 66 bytes with
// the default prefix.
func targetNamespace(prefix, target string) string {
	if len(target) <= maxScope && strings.IndexFunc(target, unsafeInKey) < 0 {
		return prefix + "@" + target
	}
	readable := target
	if scheme, rest, ok := strings.Cut(readable, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		readable = scheme + "://" + rest
	} else if at := strings.LastIndex(readable, "@"); at >= 0 {
		readable = readable[at+1:]
	}
	readable = strings.Map(func(r rune) rune {
		if unsafeInKey(r) {
			return '_'
		}
		return r
	}, readable)
	if len(readable) > 40 {
		readable = readable[:40]
	}
	sum := sha256.Sum256([]byte(target))
	return prefix + "@" + readable + "~" + hex.EncodeToString(sum[:8])
}

func unsafeInKey(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("._-:/[]", r)
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
	if (a.Cluster.Namespace == nil) != (b.Cluster.Namespace == nil) {
		return false // derived from the target, or shared on purpose
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
// cluster section (or a Server's chain), and, when the namespace is left at
// its default, until the chain's first call (the namespace comes from that
// call's target).
func (c *Chain) Cluster() *cluster.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cluster
}
