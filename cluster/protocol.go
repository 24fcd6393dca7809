package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
)

// The keys and messages of docs/cluster.md. {ns} is the namespace, {name}
// the breaker's name as keyName bounds it.
//
//	{ns}:w:{name}               hash: instance → "calls failures slow sinceMs atMs"; PX 3 sync intervals
//	                            (see publish.go for when a field is written)
//	{ns}:open:{name}            string "untilMs reopens reason instance"; PX until untilMs
//	{ns}:probes:{name}:{round}  integer: half-open probes leased in that round; PX 3 sync intervals;
//	                            "closed" once an instance's probes closed the round; PX 10 sync intervals
//	{ns}:events                 channel: "o untilMs reopens reason instance name" | "c round atMs instance name"
//	{ns}:alive:{instance}       string "atMs": written at every sync, never read; PX 3 sync intervals
//
// maxKeyName bounds a breaker's name in keys and messages.
const maxKeyName = 200

// keyName is a breaker's name in keys and messages: the name itself up to
// maxKeyName bytes, else its first 100 bytes, "~" and 16 hex digits of its
// SHA-256.
func keyName(name string) string {
	if len(name) <= maxKeyName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:100] + "~" + hex.EncodeToString(sum[:8])
}

func (c *Cluster) windowKey(name string) string { return c.ns + ":w:" + name }
func (c *Cluster) openKey(name string) string   { return c.ns + ":open:" + name }
func (c *Cluster) probesKey(name string, round int64) string {
	return c.ns + ":probes:" + name + ":" + strconv.FormatInt(round, 10)
}

// delStale deletes the fields of a window hash (KEYS[1]) that a sync judged
// stale (ARGV: field, value, field, value…), each only if it still holds
// the value judged: a field its instance wrote again since (a late
// instance, not a dead one) stays. It is sent with EVAL in the sync's
// pipeline, only when a sync found stale fields.
const delStale = `
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i+1] then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return n
`

// claimOpen sets the open key unless an open still in force holds it, and
// then publishes it; it returns the value in force, and 1 when it replaced
// what no instance writes, 2 an open ending past latestMs (its writer's
// clock runs ahead, or its wait is longer: no garbage), else 0. An open in force is a well-formed
// record whose end is after nowMs and no later than latestMs (the
// claimer's longest open wait and one sync interval of clock skew from
// now): anything else in the key (another type, garbage, an end no
// instance of this configuration writes, an open that is over) is
// replaced.
//
//	KEYS[1] open key; ARGV: value, px, nowMs, channel, message, latestMs
var claimOpen = redis.NewScript(`
local bad = 0
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then
  local v = redis.call('GET', KEYS[1])
  local u, r
  if #v <= 256 then u, r = string.match(v, '^(%d+) (%d+) %S+ %S+$') end
  u, r = tonumber(u), tonumber(r)
  if not u or r > 64 then bad = 1
  elseif u > tonumber(ARGV[6]) then bad = 2
  elseif u > tonumber(ARGV[3]) then return {v, 0} end
elseif t ~= 'none' then
  bad = 1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return {ARGV[1], bad}
`)

// leaseProbes takes up to want of the round's limit probes and returns how
// many it took, or -1 when the round is closed already. A key of another
// type, or a value that is not a count, is replaced; a count of probes
// taken keeps a TTL of at most px, whoever wrote it.
//
//	KEYS[1] probes key; ARGV: want, limit, px
var leaseProbes = redis.NewScript(`
local px = tonumber(ARGV[3])
local n = 0
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then
  local v = redis.call('GET', KEYS[1])
  if v == 'closed' then return -1 end
  if string.match(v, '^%d+$') and #v <= 15 then n = tonumber(v) end
elseif t ~= 'none' then
  redis.call('DEL', KEYS[1])
end
local take = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - n)
if take <= 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 or ttl > px then redis.call('PEXPIRE', KEYS[1], px) end
  return 0
end
redis.call('SET', KEYS[1], n + take, 'PX', px)
return take
`)

// giveBack returns n unused probes (ARGV[1]) to the round's count
// (KEYS[1]), keeping its TTL; anything but a count is left as it is.
var giveBack = `
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return 0 end
local v = redis.call('GET', KEYS[1])
if not string.match(v, '^%d+$') or #v > 15 then return 0 end
local m = tonumber(v) - tonumber(ARGV[1])
if m <= 0 then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], m, 'KEEPTTL') end
return 1
`

// repairKey puts right one key that held what no instance writes: of
// another type than want (or want "*": whatever it holds), it is deleted; a
// hash of more than maxFields fields is deleted; a string still holding
// found is replaced by put (PX px), or deleted when put is empty, or, when
// put is found, kept with its TTL cut to px if longer (PEXPIRE … LT; no
// TTL counts as longer). It returns 1 when it changed the key. Each repair
// is conditional, so that it never undoes what another instance wrote
// since the key was read.
//
//	KEYS[1] the key; ARGV: want, found, put, px, maxFields
var repairKey = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return 0 end
if ARGV[1] == '*' or t ~= ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
if t == 'hash' then
  local m = tonumber(ARGV[5])
  if m > 0 and redis.call('HLEN', KEYS[1]) > m then redis.call('DEL', KEYS[1]) return 1 end
  return 0
end
if ARGV[2] == '' or redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == ARGV[2] then return redis.call('PEXPIRE', KEYS[1], ARGV[4], 'LT') end
if ARGV[3] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4]) end
return 1
`)

// closedMark is the probes key's value once the round closed.
const closedMark = "closed"

// aggregate is one instance's published window.
type aggregate struct {
	calls, failures, slow int64
	since, at             int64 // ms
}

func (a aggregate) encode() string {
	var buf [5 * 21]byte
	b := buf[:0]
	for i, n := range [...]int64{a.calls, a.failures, a.slow, a.since, a.at} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(b)
}

func decodeAggregate(s string) (aggregate, bool) {
	var v [5]int64
	n := 0
	for f := range strings.FieldsSeq(s) {
		if n == len(v) {
			return aggregate{}, false
		}
		x, err := strconv.ParseInt(f, 10, 64)
		if err != nil || x < 0 {
			return aggregate{}, false
		}
		v[n] = x
		n++
	}
	if n != len(v) {
		return aggregate{}, false
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

// encode writes the re-opens capped at maxReopens: a breaker counts them
// without bound (a backend down for hours), and past maxReopens its wait
// stopped growing long before (64 doublings pass any wait).
func (o opening) encode() string {
	return strconv.FormatInt(o.until, 10) + " " + strconv.Itoa(min(o.reopens, maxReopens)) + " " + o.reason.String() + " " + o.instance
}

// maxRecord bounds an open record's length: longer is garbage.
const maxRecord = 256

// maxReopens bounds the re-opens a record or message carries: more is
// garbage (claimOpen's script holds the same bound).
const maxReopens = 64

func decodeOpening(s string) (opening, bool) {
	if len(s) > maxRecord {
		return opening{}, false
	}
	f := strings.Fields(s)
	if len(f) != 4 {
		return opening{}, false
	}
	until, err1 := strconv.ParseInt(f[0], 10, 64)
	reopens, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || until <= 0 || reopens < 0 || reopens > maxReopens {
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

// decodeMessage reads what message.encode writes. The name is the rest of
// the message, spaces included, and may be empty: a breaker with no name
// (circuitbreaker's default) is shared under the empty name, and before,
// its messages were written and then refused as garbage by every peer.
func decodeMessage(s string) (message, bool) {
	switch {
	case strings.HasPrefix(s, "o "):
		f := strings.SplitN(s[2:], " ", 5)
		if len(f) != 5 {
			return message{}, false
		}
		o, ok := decodeOpening(strings.Join(f[:4], " "))
		return message{open: true, opening: o, instance: o.instance, name: f[4]}, ok
	case strings.HasPrefix(s, "c "):
		f := strings.SplitN(s[2:], " ", 4)
		if len(f) != 4 {
			return message{}, false
		}
		round, err1 := strconv.ParseInt(f[0], 10, 64)
		at, err2 := strconv.ParseInt(f[1], 10, 64)
		return message{round: round, at: at, instance: f[2], name: f[3]}, err1 == nil && err2 == nil
	}
	return message{}, false
}
