package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlns"
)

// DeadLetterSection is the deadLetter section (docs/deadletter.md): calls a
// rejection stops are kept in a durable, bounded queue and replayed when
// the backend is back. Like rateLimiter it is off unless some level writes
// it; it is keyed like the circuit breaker (one queue per key).
type DeadLetterSection struct {
	Enabled *bool `yaml:"enabled,omitempty"`
	// On lists what defers a call: CIRCUIT_OPEN (the default) and
	// RETRIES_EXHAUSTED.
	On Names `yaml:"on,omitempty"`
	// Store is local (a bbolt file at Path) or redis (Redis Streams in
	// Namespace, through Redis or the cluster's client).
	Store     *string       `yaml:"store,omitempty"`
	Path      *string       `yaml:"path,omitempty"`
	Redis     *RedisSection `yaml:"redis,omitempty"`
	Namespace *string       `yaml:"namespace,omitempty"`
	// The bounds, per key.
	MaxEntries    *int      `yaml:"maxEntries,omitempty"`
	MaxBytes      *int      `yaml:"maxBytes,omitempty"`
	MaxAge        *Duration `yaml:"maxAge,omitempty"`
	MaxReplays    *int      `yaml:"maxReplays,omitempty"`
	ReplayRate    *float64  `yaml:"replayRate,omitempty"`
	ReplayTimeout *Duration `yaml:"replayTimeout,omitempty"`
	// Metadata lists the metadata keys kept with an entry; none by default.
	Metadata Names `yaml:"metadata,omitempty"`
}

// deadLetterOn reports whether the levels turn the dead-letter queue on:
// one of them writes the section, and the last enabled written is not
// false.
func deadLetterOn(levels ...*Policies) bool {
	written, on := false, true
	for _, p := range levels {
		if p == nil || p.DeadLetter == nil {
			continue
		}
		written = true
		if e := p.DeadLetter.Enabled; e != nil {
			on = *e
		}
	}
	return written && on
}

// DeadLetter is a key's dead-letter queue, resolved: its settings, and the
// store's own (the Redis store's client and namespace).
type DeadLetter struct {
	Config deadletter.Config
	// Redis is the store's own Redis (store: redis with redis:), nil to use
	// the cluster's client.
	Redis     *RedisSection
	Namespace string
}

// DeadLetterConfig maps a resolved deadLetter section onto the queue's
// Config and checks it.
func DeadLetterConfig(s *DeadLetterSection) (DeadLetter, error) {
	var errs []error
	c := deadletter.DefaultConfig()
	if s.On != nil && len(s.On) == 0 { // written as [], which would read as the default
		errs = append(errs, &PathError{Path: "on", Problem: "is empty: name CIRCUIT_OPEN, RETRIES_EXHAUSTED or both (leave it out for CIRCUIT_OPEN); to defer nothing, set enabled: false"})
	}
	if len(s.On) > 0 {
		c.On = 0
		for i, name := range s.On {
			t, err := deadletter.ParseTrigger(name)
			if err != nil {
				errs = append(errs, &PathError{Path: "on[" + strconv.Itoa(i) + "]", Problem: "must be CIRCUIT_OPEN or RETRIES_EXHAUSTED, got " + strconv.Quote(Clip(name))})
				continue
			}
			c.On |= t
		}
	}
	if s.Store != nil {
		k, err := deadletter.ParseStoreKind(*s.Store)
		if err != nil {
			errs = append(errs, &PathError{Path: "store", Problem: "must be local or redis, got " + strconv.Quote(Clip(*s.Store))})
		}
		c.Store = k
	}
	dl := DeadLetter{Redis: s.Redis}
	if c.Store == deadletter.StoreRedis {
		c.Path = ""
		if s.Path != nil {
			errs = append(errs, &PathError{Path: "path", Problem: "is for store: local; store: redis keeps its entries in Redis"})
		}
		if s.Namespace == nil || strings.TrimSpace(*s.Namespace) == "" {
			errs = append(errs, &PathError{Path: "namespace", Problem: "store: redis needs a namespace: the streams every instance of this client shares (unrelated clients must not share one, or they replay each other's calls)"})
		} else if !dlns.Check(*s.Namespace) {
			errs = append(errs, &PathError{Path: "namespace", Problem: dlns.Problem + ", got " + strconv.Quote(Clip(*s.Namespace))})
		} else {
			dl.Namespace = *s.Namespace
		}
		if s.Redis != nil {
			if _, err := s.Redis.Options(); err != nil {
				var pe *PathError
				if errors.As(err, &pe) {
					errs = append(errs, &PathError{Path: "redis" + strings.TrimPrefix(pe.Path, "cluster.redis"), Problem: pe.Problem})
				}
			}
		}
	} else {
		if s.Path != nil {
			c.Path = *s.Path
		}
		if s.Redis != nil || s.Namespace != nil {
			errs = append(errs, &PathError{Path: "store", Problem: "redis and namespace are for store: redis"})
		}
	}
	set(&c.MaxEntries, s.MaxEntries)
	if s.MaxBytes != nil {
		c.MaxBytes = int64(*s.MaxBytes)
	}
	if s.MaxAge != nil {
		c.MaxAge = s.MaxAge.D()
	}
	set(&c.MaxReplays, s.MaxReplays)
	set(&c.ReplayRate, s.ReplayRate)
	if s.ReplayTimeout != nil {
		c.ReplayTimeout = s.ReplayTimeout.D()
	}
	c.Metadata = deadletter.Allow(s.Metadata...)
	for _, v := range []struct {
		key string
		bad bool
		got func() any
	}{
		{"maxEntries", s.MaxEntries != nil && *s.MaxEntries < 1, func() any { return *s.MaxEntries }},
		{"maxBytes", s.MaxBytes != nil && *s.MaxBytes < 1, func() any { return *s.MaxBytes }},
		{"maxAge", s.MaxAge != nil && s.MaxAge.D() <= 0, func() any { return s.MaxAge.D() }},
		{"maxReplays", s.MaxReplays != nil && *s.MaxReplays < 1, func() any { return *s.MaxReplays }},
		{"replayRate", s.ReplayRate != nil && *s.ReplayRate <= 0, func() any { return *s.ReplayRate }},
		{"replayTimeout", s.ReplayTimeout != nil && s.ReplayTimeout.D() <= 0, func() any { return s.ReplayTimeout.D() }},
	} {
		if v.bad {
			errs = append(errs, &PathError{Path: v.key, Problem: fmt.Sprintf("must be positive, got %v", v.got())})
		}
	}
	errs = append(errs, c.Validate())
	dl.Config = c
	return dl, errors.Join(errs...)
}
