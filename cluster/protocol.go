package cluster

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
)

// The keys and messages of docs/cluster.md. {ns} is the namespace, {name}
// the breaker's key.
//
//	{ns}:w:{name}               hash: instance → "calls failures slow sinceMs atMs"; PX 3 sync intervals
//	{ns}:open:{name}            string "untilMs reopens reason instance"; PX until untilMs
//	{ns}:probes:{name}:{round}  integer: half-open probes leased in that round; PX 3 sync intervals;
//	                            "closed" once an instance's probes closed the round; PX 10 sync intervals
//	{ns}:events                 channel: "o untilMs reopens reason instance name" | "c round atMs instance name"
func (c *Cluster) windowKey(name string) string { return c.ns + ":w:" + name }
func (c *Cluster) openKey(name string) string   { return c.ns + ":open:" + name }
func (c *Cluster) probesKey(name string, round int64) string {
	return c.ns + ":probes:" + name + ":" + strconv.FormatInt(round, 10)
}

// claimOpen sets the open key unless an open still in force holds it, and
// then publishes it; it returns the value in force.
//
//	KEYS[1] open key; ARGV: value, px, nowMs, channel, message
var claimOpen = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local u = tonumber(string.match(v, '^(%d+)'))
  if u and u > tonumber(ARGV[3]) then return v end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return ARGV[1]
`)

// leaseProbes takes up to want of the round's limit probes and returns how
// many it took, or -1 when the round is closed already.
//
//	KEYS[1] probes key; ARGV: want, limit, px
var leaseProbes = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == 'closed' then return -1 end
local n = tonumber(v or '0') or 0
local take = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - n)
if take <= 0 then return 0 end
redis.call('INCRBY', KEYS[1], take)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return take
`)

// closedMark is the probes key's value once the round closed.
const closedMark = "closed"

// aggregate is one instance's published window.
type aggregate struct {
	calls, failures, slow int64
	since, at             int64 // ms
}

func (a aggregate) encode() string {
	return strconv.FormatInt(a.calls, 10) + " " + strconv.FormatInt(a.failures, 10) + " " +
		strconv.FormatInt(a.slow, 10) + " " + strconv.FormatInt(a.since, 10) + " " + strconv.FormatInt(a.at, 10)
}

func decodeAggregate(s string) (aggregate, bool) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return aggregate{}, false
	}
	var v [5]int64
	for i := range f {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || n < 0 {
			return aggregate{}, false
		}
		v[i] = n
	}
	a := aggregate{calls: v[0], failures: v[1], slow: v[2], since: v[3], at: v[4]}
	if a.failures > a.calls || a.slow > a.calls {
		return aggregate{}, false
	}
	return a, true
}

// opening is an open as written in the open key and the "o" message.
type opening struct {
	until    int64 // ms
	reopens  int
	reason   circuitbreaker.Reason
	instance string
}

func (o opening) encode() string {
	return strconv.FormatInt(o.until, 10) + " " + strconv.Itoa(o.reopens) + " " + o.reason.String() + " " + o.instance
}

func decodeOpening(s string) (opening, bool) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return opening{}, false
	}
	until, err1 := strconv.ParseInt(f[0], 10, 64)
	reopens, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || until <= 0 || reopens < 0 || reopens > 64 {
		return opening{}, false
	}
	return opening{until: until, reopens: reopens, reason: parseReason(f[2]), instance: f[3]}, true
}

// parseReason reads the reasons an open carries; any other is a failure-rate
// open.
func parseReason(s string) circuitbreaker.Reason {
	for _, r := range []circuitbreaker.Reason{circuitbreaker.ReasonSlowCallRate, circuitbreaker.ReasonHalfOpenTimeout} {
		if s == r.String() {
			return r
		}
	}
	return circuitbreaker.ReasonFailureRate
}

// message is one event on the channel.
type message struct {
	open     bool
	opening  opening // open
	round    int64   // close: the round closed
	at       int64   // close: when, ms
	instance string
	name     string
}

func (m message) encode() string {
	if m.open {
		return "o " + m.opening.encode() + " " + m.name
	}
	return "c " + strconv.FormatInt(m.round, 10) + " " + strconv.FormatInt(m.at, 10) + " " + m.instance + " " + m.name
}

func decodeMessage(s string) (message, bool) {
	switch {
	case strings.HasPrefix(s, "o "):
		f := strings.SplitN(s[2:], " ", 5)
		if len(f) != 5 || f[4] == "" {
			return message{}, false
		}
		o, ok := decodeOpening(strings.Join(f[:4], " "))
		return message{open: true, opening: o, instance: o.instance, name: f[4]}, ok
	case strings.HasPrefix(s, "c "):
		f := strings.SplitN(s[2:], " ", 4)
		if len(f) != 4 || f[3] == "" {
			return message{}, false
		}
		round, err1 := strconv.ParseInt(f[0], 10, 64)
		at, err2 := strconv.ParseInt(f[1], 10, 64)
		return message{round: round, at: at, instance: f[2], name: f[3]}, err1 == nil && err2 == nil
	}
	return message{}, false
}
