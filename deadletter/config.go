package deadletter

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// Trigger is a set of reasons that defer a call (the `on` key).
type Trigger uint8

const (
	// OnCircuitOpen: the call's circuit breaker refused it (CIRCUIT_OPEN).
	// The default.
	OnCircuitOpen Trigger = 1 << iota
	// OnRetriesExhausted: every attempt the retry policy allowed failed
	// with a failure code (RETRIES_EXHAUSTED).
	OnRetriesExhausted
)

var triggerNames = [...]string{resilience.ReasonCircuitOpen, "RETRIES_EXHAUSTED"}

// ParseTrigger parses one trigger name: CIRCUIT_OPEN or
// RETRIES_EXHAUSTED (any case).
func ParseTrigger(s string) (Trigger, error) {
	for i, n := range triggerNames {
		if strings.EqualFold(s, n) {
			return Trigger(1) << i, nil
		}
	}
	return 0, &resilience.OptionError{Option: "on", Value: s, Problem: "must be CIRCUIT_OPEN or RETRIES_EXHAUSTED"}
}

// Has reports whether t includes every trigger of u.
func (t Trigger) Has(u Trigger) bool { return u != 0 && t&u == u }

// String returns the trigger names joined by "|", e.g. CIRCUIT_OPEN.
func (t Trigger) String() string {
	var parts []string
	for i, n := range triggerNames {
		if t&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := t &^ (1<<len(triggerNames) - 1); rest != 0 || t == 0 {
		parts = append(parts, "Trigger("+strconv.Itoa(int(t))+")")
	}
	return strings.Join(parts, "|")
}

// StoreKind names where entries are kept (the `store` key).
type StoreKind uint8

const (
	// StoreLocal: a bbolt file on local disk (package
	// deadletter/boltstore), one per process. The default.
	StoreLocal StoreKind = iota
	// StoreRedis: Redis Streams (package deadletter/redisstore), shared by
	// every instance of the client.
	StoreRedis
)

var storeNames = [...]string{"local", "redis"}

// ParseStoreKind parses "local" or "redis" (any case).
func ParseStoreKind(s string) (StoreKind, error) {
	for i, n := range storeNames {
		if strings.EqualFold(s, n) {
			return StoreKind(i), nil
		}
	}
	return 0, &resilience.OptionError{Option: "store", Value: s, Problem: "must be local or redis"}
}

// String returns "local" or "redis".
func (k StoreKind) String() string {
	if int(k) < len(storeNames) {
		return storeNames[k]
	}
	return "StoreKind(" + strconv.Itoa(int(k)) + ")"
}

// AllowList is the set of metadata keys kept with an entry (the `metadata`
// key). Its zero value keeps none. It is a comparable value: build it with
// [Allow].
type AllowList struct {
	s      string // the valid keys, lower case, sorted, each followed by "\n"
	bad    string // the first invalid key given to Allow, for Validate
	hasBad bool
}

// Allow returns the allow-list of the given metadata keys (gRPC metadata
// keys or HTTP header names), compared without regard to case. A key that
// is not printable ASCII without spaces is left out, and [Config.Validate]
// names it.
func Allow(keys ...string) AllowList {
	var a AllowList
	ks := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" || len(k) > MaxKeyBytes || !isToken(k) {
			if !a.hasBad {
				a.bad, a.hasBad = trunc(k), true
			}
			continue
		}
		ks = append(ks, strings.ToLower(k))
	}
	slices.Sort(ks)
	ks = slices.Compact(ks)
	var b strings.Builder
	for _, k := range ks {
		b.WriteString(k)
		b.WriteByte('\n')
	}
	a.s = b.String()
	return a
}

// Keys returns the allowed keys, lower case and sorted.
func (a AllowList) Keys() []string {
	if a.s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(a.s, "\n"), "\n")
}

// Has reports whether key is allowed (any case). It does not allocate.
func (a AllowList) Has(key string) bool {
	for s := a.s; s != ""; {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return false
		}
		if strings.EqualFold(s[:i], key) {
			return true
		}
		s = s[i+1:]
	}
	return false
}

// Filter returns the entries of md whose keys a allows, keys lower case,
// values copied; nil when none is allowed.
func (a AllowList) Filter(md map[string][]string) map[string][]string {
	if a.s == "" || len(md) == 0 {
		return nil
	}
	var out map[string][]string
	for k, vs := range md {
		if !a.Has(k) {
			continue
		}
		if out == nil {
			out = make(map[string][]string)
		}
		lk := strings.ToLower(k)
		out[lk] = append(out[lk], vs...)
	}
	return out
}

// Bounds on the settings.
const (
	DefaultPath          = "meshless-deadletter.db"
	DefaultMaxEntries    = 100_000
	DefaultMaxBytes      = 64 << 20
	DefaultMaxAge        = 24 * time.Hour
	DefaultMaxReplays    = 5
	DefaultReplayRate    = 50
	DefaultReplayTimeout = 2 * time.Second

	MaxMaxEntries    = 10_000_000
	MaxMaxBytes      = 1 << 40
	MaxMaxAge        = 365 * 24 * time.Hour
	MaxMaxReplays    = 1000
	MaxReplayRate    = 100_000
	MaxReplayTimeout = time.Hour
	MaxAllowedKeys   = 32
)

// Config is a dead-letter queue's settings, each named after its YAML key
// in a `deadLetter` section. A zero field means its default (see
// [DefaultConfig]). It is a plain comparable value.
//
// The bounds, ages, replay counts and rates apply per key: one breaker key's
// backlog never refuses another key's calls. With one breaker per service,
// the service's settings serve all its methods; a method may only change On
// and Metadata (what defers a call and what is kept with it).
type Config struct {
	// On says which rejections defer a call (`on`). Default
	// OnCircuitOpen.
	On Trigger
	// Store says where entries are kept (`store`). Default StoreLocal.
	Store StoreKind
	// Path is the bbolt file of StoreLocal (`path`). Default
	// [DefaultPath], in the working directory. Put it on a volume that
	// outlives the process.
	Path string
	// MaxEntries bounds a key's entries, waiting and parked (`maxEntries`).
	// Default 100,000.
	MaxEntries int
	// MaxBytes bounds the encoded size of a key's entries, waiting and
	// parked (`maxBytes`). Default 64 MiB.
	MaxBytes int64
	// MaxAge is how long an entry may wait: one whose turn comes when it
	// has waited MaxAge or longer is expired (counted and dropped) instead
	// of replayed (`maxAge`). Default 24h.
	MaxAge time.Duration
	// MaxReplays is how many failed replays park an entry (`maxReplays`).
	// Default 5.
	MaxReplays int
	// ReplayRate is the most replays per second for one key (`replayRate`).
	// Default 50.
	ReplayRate float64
	// ReplayTimeout bounds each replay (`replayTimeout`). Default 2s.
	ReplayTimeout time.Duration
	// Metadata lists the metadata keys kept with an entry (`metadata`).
	// Default none: credentials never reach the store unless listed.
	Metadata AllowList
}

// DefaultConfig returns the defaults: on CIRCUIT_OPEN, a local store at
// [DefaultPath], 100,000 entries and 64 MiB per key, entries expire after
// 24h and park after 5 failed replays, 50 replays a second per key, 2s per
// replay, no metadata kept.
func DefaultConfig() Config {
	return Config{
		On: OnCircuitOpen, Store: StoreLocal, Path: DefaultPath,
		MaxEntries: DefaultMaxEntries, MaxBytes: DefaultMaxBytes, MaxAge: DefaultMaxAge,
		MaxReplays: DefaultMaxReplays, ReplayRate: DefaultReplayRate, ReplayTimeout: DefaultReplayTimeout,
	}
}

// withDefaults returns c with each zero field set to its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.On == 0 {
		c.On = d.On
	}
	if c.Path == "" && c.Store == StoreLocal {
		c.Path = d.Path
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = d.MaxEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = d.MaxAge
	}
	if c.MaxReplays == 0 {
		c.MaxReplays = d.MaxReplays
	}
	if c.ReplayRate == 0 {
		c.ReplayRate = d.ReplayRate
	}
	if c.ReplayTimeout == 0 {
		c.ReplayTimeout = d.ReplayTimeout
	}
	return c
}

// Limits returns the per-key bounds a store enforces on [Store.Append].
func (c Config) Limits() Limits {
	c = c.withDefaults()
	return Limits{MaxEntries: c.MaxEntries, MaxBytes: c.MaxBytes}
}

// Validate reports every invalid setting, each naming its key (errors.Is
// [resilience.ErrInvalidOption]). Zero fields are valid: they mean the
// defaults.
func (c Config) Validate() error {
	var errs opterr.Errors
	if rest := c.On &^ (1<<len(triggerNames) - 1); rest != 0 {
		errs.Add("on", c.On, "must be CIRCUIT_OPEN and/or RETRIES_EXHAUSTED")
	}
	switch {
	case int(c.Store) >= len(storeNames):
		errs.Add("store", c.Store, "must be local or redis")
	case c.Store == StoreRedis && c.Path != "":
		errs.Add("path", c.Path, "is for store: local only")
	}
	if strings.ContainsRune(c.Path, 0) {
		errs.Add("path", c.Path, "must not contain NUL")
	}
	if c.MaxEntries < 0 || c.MaxEntries > MaxMaxEntries {
		errs.Add("maxEntries", c.MaxEntries, "must be in [1, "+strconv.Itoa(MaxMaxEntries)+"] (0: the default)")
	}
	if c.MaxBytes != 0 && (c.MaxBytes < 1<<10 || c.MaxBytes > MaxMaxBytes) {
		errs.Add("maxBytes", c.MaxBytes, "must be in [1024, "+strconv.FormatInt(MaxMaxBytes, 10)+"] (0: the default)")
	}
	if c.MaxAge < 0 || c.MaxAge > MaxMaxAge {
		errs.Add("maxAge", c.MaxAge, "must be in (0, "+MaxMaxAge.String()+"] (0: the default)")
	}
	if c.MaxReplays < 0 || c.MaxReplays > MaxMaxReplays {
		errs.Add("maxReplays", c.MaxReplays, "must be in [1, "+strconv.Itoa(MaxMaxReplays)+"] (0: the default)")
	}
	if c.ReplayRate < 0 || c.ReplayRate > MaxReplayRate || math.IsNaN(c.ReplayRate) {
		errs.Add("replayRate", c.ReplayRate, "must be in (0, "+strconv.Itoa(MaxReplayRate)+"] replays per second (0: the default)")
	} else if c.ReplayRate > 0 && c.ReplayRate < 1.0/3600 {
		errs.Add("replayRate", c.ReplayRate, "must be at least one replay an hour")
	}
	if c.ReplayTimeout < 0 || c.ReplayTimeout > MaxReplayTimeout {
		errs.Add("replayTimeout", c.ReplayTimeout, "must be in (0, "+MaxReplayTimeout.String()+"] (0: the default)")
	}
	keys := c.Metadata.Keys()
	if len(keys) > MaxAllowedKeys {
		errs.Add("metadata", len(keys), "must list at most "+strconv.Itoa(MaxAllowedKeys)+" keys")
	}
	if c.Metadata.hasBad {
		errs.Add("metadata", c.Metadata.bad, "is not a metadata key (1 to "+strconv.Itoa(MaxKeyBytes)+" printable ASCII characters without spaces)")
	}
	return errs.Err()
}

// Limits are a key's bounds, enforced by [Store.Append] atomically with the
// append: the key's entries, waiting and parked, and their encoded bytes.
type Limits struct {
	MaxEntries int
	MaxBytes   int64
}
