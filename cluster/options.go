package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/meshless/meshless/internal/clusterkey"
	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// DecideOn says which failure and slow-call rates may open a breaker.
type DecideOn uint8

const (
	// DecideEither: the breaker's own window, or the cluster's counts, may
	// open it. The default.
	DecideEither DecideOn = iota
	// DecideLocal: only the breaker's own window opens it; opens and probes
	// are still shared.
	DecideLocal
	// DecideCluster: only the cluster's counts open it while Redis answers;
	// with Redis away the breaker decides on its own window.
	DecideCluster
)

var decideNames = [...]string{"either", "local", "cluster"}

// String returns "either", "local" or "cluster".
func (d DecideOn) String() string {
	if int(d) < len(decideNames) {
		return decideNames[d]
	}
	return "DecideOn(" + strconv.Itoa(int(d)) + ")"
}

// ParseDecideOn parses "local", "cluster" or "either" (any case).
func ParseDecideOn(s string) (DecideOn, error) {
	for i, n := range decideNames {
		if strings.EqualFold(s, n) {
			return DecideOn(i), nil
		}
	}
	return 0, &resilience.OptionError{Option: "decideOn", Value: s, Problem: "must be local, cluster or either"}
}

// Limits on the settings.
const (
	MinSyncInterval    = 10 * time.Millisecond
	MaxSyncInterval    = time.Hour
	MaxNamespaceLength = 128
)

// Config is cluster mode's settings, named after the YAML keys of the
// cluster section. It is a plain comparable value; start from
// [DefaultConfig].
type Config struct {
	// Namespace prefixes every key and the channel: instances that use the
	// same Redis and namespace share every breaker of the same name, so
	// give each client its own (grpcmw derives one from the client's target
	// when its YAML leaves it unwritten). It holds no space, and no ":w:",
	// ":open:", ":probes:" or ":alive:" nor ends with ":w", ":open",
	// ":probes" or ":alive", so that no two namespaces write one key.
	Namespace string
	// SyncInterval is how often an instance publishes its windows and reads
	// the cluster's.
	SyncInterval time.Duration
	// DecideOn says which rates may open a breaker.
	DecideOn DecideOn
	// Timeout bounds each exchange with Redis; past it the sync has failed.
	// 0 means half the sync interval, at most one second.
	Timeout time.Duration
}

// DefaultConfig returns the defaults: namespace "meshless", a sync every
// second, decideOn either.
func DefaultConfig() Config {
	return Config{Namespace: "meshless", SyncInterval: time.Second, DecideOn: DecideEither}
}

// Validate reports every invalid setting, each naming its key (errors.Is
// [resilience.ErrInvalidOption]).
func (c Config) Validate() error {
	var errs opterr.Errors
	switch {
	case c.Namespace == "":
		errs.Add("namespace", c.Namespace, "must not be empty")
	case len(c.Namespace) > MaxNamespaceLength:
		errs.Add("namespace", c.Namespace, "must be at most "+strconv.Itoa(MaxNamespaceLength)+" bytes")
	case strings.ContainsAny(c.Namespace, " \t\r\n"):
		errs.Add("namespace", c.Namespace, "must not contain spaces")
	case clusterkey.Problem(c.Namespace) != "":
		errs.Add("namespace", c.Namespace, clusterkey.Problem(c.Namespace))
	}
	if c.SyncInterval < MinSyncInterval || c.SyncInterval > MaxSyncInterval {
		errs.Add("syncInterval", c.SyncInterval, "must be in ["+MinSyncInterval.String()+", "+MaxSyncInterval.String()+"]")
	}
	if int(c.DecideOn) >= len(decideNames) {
		errs.Add("decideOn", c.DecideOn, "must be local, cluster or either")
	}
	if c.Timeout < 0 {
		errs.Add("timeout", c.Timeout, "must not be negative (0: half the sync interval, at most 1s)")
	}
	return errs.Err()
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return min(c.SyncInterval/2, time.Second)
}

// Listener hears what cluster mode does, for metrics (otelmw's
// ClusterListener records the meshless.cluster.* metrics). Its methods are
// called from the cluster's own goroutines and must not block.
type Listener interface {
	// Synced reports one sync with Redis: ok, or failed.
	Synced(ok bool)
	// Connected reports that Redis started or stopped answering.
	Connected(up bool)
	// RemoteOpen reports that the breaker named name opened because another
	// instance opened the same key.
	RemoteOpen(name string)
}

type options struct {
	Config
	clock    resilience.Clock
	logger   *slog.Logger
	listener Listener
	instance string
}

// Option configures a [Cluster].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithConfig sets the settings: start from [DefaultConfig] and change
// its fields. Default [DefaultConfig].
func WithConfig(c Config) Option { return optionFunc(func(o *options) { o.Config = c }) }

// WithClock sets the clock that dates what the cluster writes and reads:
// give it the breakers' clock. Default [resilience.SystemClock].
func WithClock(clk resilience.Clock) Option { return optionFunc(func(o *options) { o.clock = clk }) }

// WithLogger sets where the cluster logs that Redis went away and came
// back, once each time, and for a Redis that keeps flapping at most one
// line a minute past the first three outages and their ends (with the
// count of changes not logged). Default [slog.Default].
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithListener sets the listener of syncs and remote opens. Default none.
func WithListener(l Listener) Option { return optionFunc(func(o *options) { o.listener = l }) }

// WithInstanceID names this instance in what it writes; it must be unique
// in the cluster. Default: random.
func WithInstanceID(id string) Option { return optionFunc(func(o *options) { o.instance = id }) }

func defaultOptions() options {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return options{Config: DefaultConfig(), clock: resilience.SystemClock(), instance: hex.EncodeToString(b[:])}
}

func (o *options) validate() error {
	var errs opterr.Errors
	if err := o.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.clock == nil {
		errs.Add("clock", nil, "must not be nil")
	}
	// Any white space, not only ASCII's: the records split their fields on
	// it (strings.Fields), and an ID with one would make every open this
	// instance writes read as garbage.
	if o.instance == "" || strings.IndexFunc(o.instance, unicode.IsSpace) >= 0 || len(o.instance) > 64 {
		errs.Add("instanceID", o.instance, "must be 1 to 64 bytes without spaces")
	}
	return errs.Err()
}

// MaxInstances bounds the instances whose windows one key sums: a window
// hash with more fields is garbage, dropped whole and counted not at all.
const MaxInstances = 1024
