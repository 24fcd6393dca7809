package deadletter_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/resilience"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  deadletter.Config
		want string // "" for valid
	}{
		{name: "zero is the defaults", cfg: deadletter.Config{}},
		{name: "defaults", cfg: deadletter.DefaultConfig()},
		{name: "redis", cfg: deadletter.Config{Store: deadletter.StoreRedis, On: deadletter.OnCircuitOpen | deadletter.OnRetriesExhausted}},
		{name: "unknown trigger", cfg: deadletter.Config{On: 8}, want: "on: must be CIRCUIT_OPEN and/or RETRIES_EXHAUSTED"},
		{name: "unknown store", cfg: deadletter.Config{Store: 7}, want: "store: must be local or redis"},
		{name: "path with redis", cfg: deadletter.Config{Store: deadletter.StoreRedis, Path: "x.db"}, want: `path: is for store: local only, got "x.db"`},
		{name: "negative maxEntries", cfg: deadletter.Config{MaxEntries: -1}, want: "maxEntries: must be in [1, 10000000] (0: the default), got -1"},
		{name: "tiny maxBytes", cfg: deadletter.Config{MaxBytes: 10}, want: "maxBytes: must be in [1024,"},
		{name: "negative maxAge", cfg: deadletter.Config{MaxAge: -time.Second}, want: "maxAge: must be in (0, 8760h0m0s] (0: the default), got -1s"},
		{name: "huge maxReplays", cfg: deadletter.Config{MaxReplays: 5000}, want: "maxReplays: must be in [1, 1000]"},
		{name: "NaN rate", cfg: deadletter.Config{ReplayRate: math.NaN()}, want: "replayRate: must be in (0, 100000]"},
		{name: "too slow a rate", cfg: deadletter.Config{ReplayRate: 1e-6}, want: "replayRate: must be at least one replay an hour"},
		{name: "negative timeout", cfg: deadletter.Config{ReplayTimeout: -1}, want: "replayTimeout: must be in (0, 1h0m0s]"},
		{name: "bad metadata key", cfg: deadletter.Config{Metadata: deadletter.Allow("x-request-id", "has space")}, want: `metadata: is not a metadata key (1 to 256 printable ASCII characters without spaces), got "has space"`},
		{name: "empty metadata key", cfg: deadletter.Config{Metadata: deadletter.Allow("")}, want: `metadata: is not a metadata key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, resilience.ErrInvalidOption) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			if _, err := deadletter.New(deadlettertest.NewStore(nil), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigIsComparable(t *testing.T) {
	a := deadletter.Config{Metadata: deadletter.Allow("X-Request-ID", "traceparent")}
	b := deadletter.Config{Metadata: deadletter.Allow("traceparent", "x-request-id", "TRACEPARENT")}
	if a != b {
		t.Fatal("equal allow-lists in another order and case compare unequal")
	}
	if a == (deadletter.Config{}) {
		t.Fatal("an allow-list compares equal to none")
	}
	if got := a.Metadata.Keys(); !slices.Equal(got, []string{"traceparent", "x-request-id"}) {
		t.Fatalf("Keys() = %v", got)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  deadletter.Option
		want string
	}{
		{name: "nil clock", opt: deadletter.WithClock(nil), want: "clock: must not be nil"},
		{name: "short interval", opt: deadletter.WithInterval(time.Millisecond), want: "interval: must be at least 10ms"},
		{name: "owner with a space", opt: deadletter.WithOwner("a b"), want: "owner: must be 1 to 64 printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deadletter.New(deadlettertest.NewStore(nil), deadletter.Config{}, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := deadletter.New(nil, deadletter.Config{}); err == nil || !strings.Contains(err.Error(), "store: must not be nil") {
		t.Fatalf("nil store: %v", err)
	}
}

// A nil option is skipped, as every other constructor of the module skips
// one; it made New panic.
func TestNewSkipsANilOption(t *testing.T) {
	q, err := deadletter.New(deadlettertest.NewStore(nil), deadletter.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
}

func TestTriggerAndStoreNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want deadletter.Trigger
		err  bool
	}{
		{in: "CIRCUIT_OPEN", want: deadletter.OnCircuitOpen},
		{in: "retries_exhausted", want: deadletter.OnRetriesExhausted},
		{in: "BULKHEAD_FULL", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := deadletter.ParseTrigger(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ParseTrigger(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
	both := deadletter.OnCircuitOpen | deadletter.OnRetriesExhausted
	if s := both.String(); s != "CIRCUIT_OPEN|RETRIES_EXHAUSTED" {
		t.Fatalf("String() = %q", s)
	}
	if !both.Has(deadletter.OnRetriesExhausted) || deadletter.OnCircuitOpen.Has(both) || both.Has(0) {
		t.Fatal("Has")
	}
	if k, err := deadletter.ParseStoreKind("Redis"); err != nil || k != deadletter.StoreRedis || k.String() != "redis" {
		t.Fatalf("ParseStoreKind: %v %v", k, err)
	}
	if _, err := deadletter.ParseStoreKind("kafka"); err == nil || !strings.Contains(err.Error(), "store: must be local or redis") {
		t.Fatalf("ParseStoreKind(kafka): %v", err)
	}
}

func TestAllowListFilter(t *testing.T) {
	a := deadletter.Allow("x-request-id")
	got := a.Filter(map[string][]string{"X-Request-Id": {"1"}, "cookie": {"c"}})
	if len(got) != 1 || !slices.Equal(got["x-request-id"], []string{"1"}) {
		t.Fatalf("Filter = %v", got)
	}
	if got := (deadletter.AllowList{}).Filter(map[string][]string{"x-request-id": {"1"}}); got != nil {
		t.Fatalf("the zero allow-list kept %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.Has("X-REQUEST-ID") }); n != 0 {
		t.Fatalf("Has allocates %v times", n)
	}
}
