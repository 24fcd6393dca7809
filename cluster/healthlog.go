package cluster

import (
	"sync"
	"time"
)

// The log of Redis going away and coming back is rate-limited: a Redis
// that flaps (down and up every few hundred milliseconds: a flapping
// network, a failover loop) logged a line per change before, hundreds a
// minute. The first outages and their ends are logged at once
// (healthLogBurst lines: three outages, so that a blip, a sync late on a
// busy machine, does not silence the outage after it), and past those at
// most one line per healthLogEvery, which says what
// Redis does then and how many changes were not logged since the line
// before; a sync that finds changes not logged logs that line as soon as
// one is due, so that the last line logged always tells the state Redis
// settled in. Counted by the cluster's clock.
const (
	healthLogBurst = 6
	healthLogEvery = time.Minute
)

// healthLog decides which changes of the cluster's health are logged.
type healthLog struct {
	mu       sync.Mutex
	spent    int       // lines logged of the burst, not regained yet
	regain   time.Time // when the earliest spent line is regained, while spent > 0
	unlogged int       // changes not logged since the last line
}

// take reports whether a line may be logged at now, and counts it.
// Called with mu held.
func (h *healthLog) take(now time.Time) bool {
	if h.spent > 0 && !now.Before(h.regain) {
		n := 1 + int(now.Sub(h.regain)/healthLogEvery)
		h.spent = max(h.spent-n, 0)
		h.regain = h.regain.Add(time.Duration(n) * healthLogEvery)
	}
	if h.spent >= healthLogBurst {
		return false
	}
	if h.spent == 0 {
		h.regain = now.Add(healthLogEvery)
	}
	h.spent++
	return true
}

// logHealth logs the cluster's health now, down or up, with the changes
// that were not logged since the last line. Called with healthLog.mu held.
func (c *Cluster) logHealth(down bool, err error) {
	var attrs []any
	attrs = append(attrs, "namespace", c.ns)
	if down && err != nil {
		attrs = append(attrs, "error", Redact(err.Error()))
	}
	if n := c.hlog.unlogged; n > 0 {
		attrs = append(attrs, "unlogged_changes", n)
		c.hlog.unlogged = 0
	}
	if down {
		c.o.logger.Warn("meshless cluster: Redis does not answer; every breaker decides locally until it does", attrs...)
		return
	}
	c.o.logger.Info("meshless cluster: Redis answers again; breakers share their decisions", attrs...)
}

// logChange logs a change of the cluster's health from prev to next, or
// counts it as not logged. Called with healthLog.mu held.
func (c *Cluster) logChange(prev, next int32, err error) {
	if next != healthDown && prev != healthDown {
		return // the first sync's success: nothing to say
	}
	if !c.hlog.take(c.o.clock.Now()) {
		c.hlog.unlogged++
		return
	}
	c.logHealth(next == healthDown, err)
}

// logUnlogged logs, once one is due, a line with the changes not logged:
// the state Redis is in now. Called after each sync.
func (c *Cluster) logUnlogged(err error) {
	c.hlog.mu.Lock()
	defer c.hlog.mu.Unlock()
	if c.hlog.unlogged == 0 || !c.hlog.take(c.o.clock.Now()) {
		return
	}
	c.logHealth(c.health.Load() == healthDown, err)
}
