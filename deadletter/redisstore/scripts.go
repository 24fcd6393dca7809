package redisstore

import "github.com/redis/go-redis/v9"

// The store's Lua scripts. Each change is one script, so that the checks
// (the bound, the lease's owner) and the change are one atomic step. Every
// value read from Redis is treated as hostile: a counter that is not a
// number is rebuilt or taken as zero, a lease without a sane TTL is taken
// over.
//
// Scripts take the keys they touch as KEYS, in the order w p m l.
//
// Keys of one dead-letter key k (one hash tag, so one Redis Cluster slot):
//
//	ns:dl:{k}:w  stream of waiting entries, field e = the encoded entry;
//	             consumer group "replay"
//	ns:dl:{k}:p  stream of parked entries, fields e and r (failed replays)
//	ns:dl:{k}:m  hash: bytes (encoded size of w and p), f:<stream id> (failed
//	             replays of a waiting entry)
//	ns:dl:{k}:l  the replay lease: the holder's name, with a TTL
//
// A name k that starts with "}" is ns:dl:}{hex of k}:w and the like
// (keysOf): "{}" is no hash tag.

// lib is prepended to every script.
const lib = `
-- blob returns field e of a stream entry's fields; of a field given twice,
-- the last one, as the store's reader takes it (what was replayed is what
-- is parked and weighed).
local function blob(fields)
  if type(fields) ~= 'table' then return nil end
  local b = nil
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'e' then b = fields[i+1] end
  end
  return b
end
local function bloblen(fields)
  local b = blob(fields)
  if type(b) == 'string' then return #b end
  return 0
end
-- bytes returns the hash's byte counter, rebuilt from both streams when it
-- is missing, not a whole number, negative, or above what the streams'
-- entries can weigh (17 MiB each): a counter that is wrong but
-- well-formed ("inf", 1e300) would otherwise refuse every append while one
-- entry is kept.
local function bytes(w, p, m)
  local n = redis.call('XLEN', w) + redis.call('XLEN', p)
  local b = tonumber(redis.call('HGET', m, 'bytes'))
  if b and b == math.floor(b) and b >= 0 and b <= 17825792 * n then return b end
  b = 0
  for _, s in ipairs({w, p}) do
    local from = '-'
    while true do
      local page = redis.call('XRANGE', s, from, '+', 'COUNT', 1000)
      if #page == 0 then break end
      for _, e in ipairs(page) do b = b + bloblen(e[2]) end
      from = '(' .. page[#page][1]
    end
  end
  redis.call('HSET', m, 'bytes', b)
  return b
end
-- setbytes sets the byte counter to b, never below zero.
local function setbytes(m, b)
  if b < 0 then b = 0 end
  redis.call('HSET', m, 'bytes', b)
end
local function group(w)
  if redis.call('EXISTS', w) == 0 then
    redis.call('XGROUP', 'CREATE', w, 'replay', '0', 'MKSTREAM')
  end
end
local function held(l, owner)
  return redis.call('GET', l) == owner
end
-- small returns v when it is a string short enough for a number the store
-- wrote (32 bytes), else false: a hostile counter is never sent whole.
local function small(v)
  if type(v) == 'string' and #v <= 32 then return v end
  return false
end
-- own drops a value of another type than the store keeps at w and p
-- (streams) and m (a hash; nil: not given): hostile, it holds nothing the
-- store wrote, and would fail every script of the key. The counters are
-- rebuilt from the streams.
local function own(w, p, m)
  for _, kt in ipairs({{w, 'stream'}, {p, 'stream'}, {m, 'hash'}}) do
    if kt[1] then
      local t = redis.call('TYPE', kt[1])['ok']
      if t ~= 'none' and t ~= kt[2] then redis.call('DEL', kt[1]) end
    end
  end
end
`

// append: KEYS w p m; ARGV blob maxEntries maxBytes → {the stream id, the
// key's entries before it}, or 0 when full.
var appendScript = redis.NewScript(lib + `
own(KEYS[1], KEYS[2], KEYS[3])
local n = redis.call('XLEN', KEYS[1]) + redis.call('XLEN', KEYS[2])
if n >= tonumber(ARGV[2]) then return 0 end
local b = bytes(KEYS[1], KEYS[2], KEYS[3])
if n == 0 then b = 0 end
if b + #ARGV[1] > tonumber(ARGV[3]) then return 0 end
group(KEYS[1])
local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
setbytes(KEYS[3], b + #ARGV[1])
return {id, n}
`)

// lease: KEYS l; ARGV owner ttl(ms) maxttl(ms) → 1 taken, 0 held by another.
// A lease without a TTL, or with one longer than any holder sets, or not a
// string at all, is hostile: it is taken over.
var leaseScript = redis.NewScript(`
local cur = redis.pcall('GET', KEYS[1])
if type(cur) == 'table' and cur.err then
  redis.call('DEL', KEYS[1])
  cur = false
end
if cur and cur ~= ARGV[1] then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 and ttl <= tonumber(ARGV[3]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// next: KEYS w m l; ARGV owner ttl(ms) → {id, fields, failed replays, 0} of
// the head, or nil; fields holds field e only, and only when it is at most
// an entry's bound (17 MiB): else {id, {}, false, its size}, so that a
// hostile blob never leaves Redis (the replay drops it). The head is the
// oldest entry pending in the group (the one a holder before was
// replaying: XAUTOCLAIM hands it over), else the next one never
// delivered. "more" when the call cleared its share of pending IDs whose
// entries are gone and more may remain: call again.
var nextScript = redis.NewScript(lib + `
if not held(KEYS[3], ARGV[1]) then return redis.error_reply('LEASELOST the lease expired') end
own(KEYS[1], false, KEYS[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local r = redis.pcall('XAUTOCLAIM', KEYS[1], 'replay', ARGV[1], 0, '0-0', 'COUNT', 1)
if type(r) == 'table' and r.err then
  if not string.find(r.err, 'NOGROUP') then return r end
  redis.call('XGROUP', 'CREATE', KEYS[1], 'replay', '0')
  r = redis.call('XAUTOCLAIM', KEYS[1], 'replay', ARGV[1], 0, '0-0', 'COUNT', 1)
end
local e = r[2] and r[2][1]
-- An id still pending whose entry was deleted takes XAUTOCLAIM's count and
-- returns no entry: go on from its cursor, so that an older pending entry
-- is never overtaken by a newer one (a bounded number of steps a call: each
-- clears deleted ids from the pending list).
local steps = 0
while not e and r[1] ~= '0-0' and steps < 100 do
  r = redis.call('XAUTOCLAIM', KEYS[1], 'replay', ARGV[1], 0, r[1], 'COUNT', 1)
  e = r[2] and r[2][1]
  steps = steps + 1
end
if not e and r[1] ~= '0-0' then return 'more' end
local function readnew()
  local rr = redis.call('XREADGROUP', 'GROUP', 'replay', ARGV[1], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
  if rr and rr[1] and rr[1][2] then return rr[1][2][1] end
  return nil
end
if not e then e = readnew() end
-- Nothing pending, nothing new, yet entries wait: the group's last
-- delivered ID was set past them (by hand). An entry that is not pending
-- was never delivered (a delivered one is deleted with its ack): the
-- group is read again from the start.
if not e and redis.call('XLEN', KEYS[1]) > 0 then
  redis.call('XGROUP', 'SETID', KEYS[1], 'replay', '0')
  e = readnew()
end
if not e then return false end
local b = blob(e[2])
if type(b) == 'string' and #b > 17825792 then return {e[1], {}, false, #b} end
local fields = {}
if b then fields = {'e', b} end
return {e[1], fields, small(redis.call('HGET', KEYS[2], 'f:' .. e[1])), 0}
`)

// remove (ack, expire): KEYS w p m l; ARGV owner id → 1.
var removeScript = redis.NewScript(lib + `
if not held(KEYS[4], ARGV[1]) then return redis.error_reply('LEASELOST the lease expired') end
own(KEYS[1], KEYS[2], KEYS[3])
local r = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
redis.pcall('XACK', KEYS[1], 'replay', ARGV[2])
if r[1] then
  local b = bytes(KEYS[1], KEYS[2], KEYS[3])
  redis.call('XDEL', KEYS[1], ARGV[2])
  setbytes(KEYS[3], b - bloblen(r[1][2]))
end
redis.call('HDEL', KEYS[3], 'f:' .. ARGV[2])
return 1
`)

// fail: KEYS w p m l; ARGV owner id maxReplays → {failed replays, parked 0|1}.
var failScript = redis.NewScript(lib + `
if not held(KEYS[4], ARGV[1]) then return redis.error_reply('LEASELOST the lease expired') end
own(KEYS[1], KEYS[2], KEYS[3])
local f = 'f:' .. ARGV[2]
local n = tonumber(redis.call('HGET', KEYS[3], f)) or 0
if n < 0 then n = 0 end
n = math.floor(n) + 1
if n < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[3], f, n)
  return {n, 0}
end
local r = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if r[1] then
  local b = blob(r[1][2]) or ''
  redis.call('XADD', KEYS[2], '*', 'e', b, 'r', n)
  redis.pcall('XACK', KEYS[1], 'replay', ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
end
redis.call('HDEL', KEYS[3], f)
return {n, 1}
`)

// release: KEYS w l; ARGV owner → 1. It also drops the group's consumers
// that hold nothing (instances come and go; each is a consumer).
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
local cs = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], 'replay')
if type(cs) ~= 'table' or cs.err then return 1 end
for i, c in ipairs(cs) do
  if i > 100 then break end
  local name, pending
  for j = 1, #c - 1, 2 do
    if c[j] == 'name' then name = c[j+1] elseif c[j] == 'pending' then pending = c[j+1] end
  end
  if name and pending == 0 then redis.call('XGROUP', 'DELCONSUMER', KEYS[1], 'replay', name) end
end
return 1
`)

// requeue: KEYS w p m; ARGV parked-id blob → 1, or 0 when it is gone.
var requeueScript = redis.NewScript(lib + `
own(KEYS[1], KEYS[2], KEYS[3])
local r = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
if not r[1] then return 0 end
local b = bytes(KEYS[1], KEYS[2], KEYS[3])
redis.call('XDEL', KEYS[2], ARGV[1])
group(KEYS[1])
redis.call('XADD', KEYS[1], '*', 'e', ARGV[2])
setbytes(KEYS[3], b + #ARGV[2] - bloblen(r[1][2]))
return 1
`)

// heads: KEYS stream [m]; ARGV from count prefix → for each entry from
// from (XRANGE's syntax), at most count: {id, the first prefix bytes of
// field e (or false when none), e's length, its failed replays (or
// false)}: field r of a parked entry, or, when m is given, f:<id> of m
// (a waiting one's). A listing reads the entries' heads, never their
// payloads (the encoding keeps the payload last), nor their other fields.
// Of a field given twice, the last one counts, as for XRANGE's reader.
var headsScript = redis.NewScript(lib + `
local page = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))
local n = tonumber(ARGV[3])
local out = {}
for i, m in ipairs(page) do
  local e, r = nil, false
  local f = m[2]
  if type(f) == 'table' then
    for j = 1, #f - 1, 2 do
      if f[j] == 'e' then e = f[j+1] elseif f[j] == 'r' then r = f[j+1] end
    end
  end
  if KEYS[2] then r = redis.call('HGET', KEYS[2], 'f:' .. m[1]) end
  if type(e) == 'string' then
    out[i] = {m[1], string.sub(e, 1, n), #e, small(r)}
  else
    out[i] = {m[1], false, 0, small(r)}
  end
end
return out
`)

// entries: KEYS stream [m]; ARGV id... → for each id still in stream:
// {id, field e (or false when none, or when it is over an entry's bound),
// e's length, its failed replays (or false), as heads}. The entry's other
// fields stay in Redis.
var entriesScript = redis.NewScript(lib + `
local out = {}
for _, id in ipairs(ARGV) do
  local r = redis.call('XRANGE', KEYS[1], id, id)
  if r[1] then
    local e, c = nil, false
    local f = r[1][2]
    if type(f) == 'table' then
      for j = 1, #f - 1, 2 do
        if f[j] == 'e' then e = f[j+1] elseif f[j] == 'r' then c = f[j+1] end
      end
    end
    if KEYS[2] then c = redis.call('HGET', KEYS[2], 'f:' .. id) end
    local size = 0
    if type(e) == 'string' then size = #e else e = false end
    if size > 17825792 then e = false end
    out[#out + 1] = {id, e, size, small(c)}
  end
end
return out
`)

// stats: KEYS w p m → {waiting, parked, the byte counter (or false)}.
var statsScript = redis.NewScript(lib + `
return {redis.call('XLEN', KEYS[1]), redis.call('XLEN', KEYS[2]), small(redis.call('HGET', KEYS[3], 'bytes'))}
`)

// keys: KEYS the key set; ARGV cursor maxlen → {next cursor, the members
// of one SSCAN page of at most maxlen bytes}.
var keysScript = redis.NewScript(`
local r = redis.call('SSCAN', KEYS[1], ARGV[1], 'COUNT', 1000)
local out = {}
for _, k in ipairs(r[2]) do
  if #k <= tonumber(ARGV[2]) then out[#out + 1] = k end
end
return {r[1], out}
`)

// purge: KEYS w p m; ARGV parked-id → 1, or 0 when it is gone.
var purgeScript = redis.NewScript(lib + `
own(KEYS[1], KEYS[2], KEYS[3])
local r = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
if not r[1] then return 0 end
local b = bytes(KEYS[1], KEYS[2], KEYS[3])
redis.call('XDEL', KEYS[2], ARGV[1])
setbytes(KEYS[3], b - bloblen(r[1][2]))
return 1
`)

// dropForeign: KEYS k; ARGV type → 1. Deletes k when it holds another type
// than type: hostile content where the store keeps one of its own.
var dropForeignScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

// addKey: KEYS the key set; ARGV key → 1. Adds key to the set, replacing
// one of another type (hostile), which would refuse every key for good.
var addKeyScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'set' then redis.call('DEL', KEYS[1]) end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
`)
