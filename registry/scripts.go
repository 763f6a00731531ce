package registry

import "github.com/redis/go-redis/v9"

// The registry's scripts. Each takes the six keys of keys.all, in that
// order, and first the offset (µs) it adds to Redis's TIME (see
// offsetArg). Each parses every argument and checks every precondition
// before its first write, and each may run twice (a reply lost and the
// call resent): a registration or refresh sets what it sets, an added job
// is added once, a dropped one dropped once.

// common are the definitions every script starts with.
const common = `
local K_info, K_state, K_queues, K_held, K_expiry, K_ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local SENTINEL = string.char(1)
-- live counts the workers live at now (the sentinel, at +inf, is not one).
local function live(now)
  local n = redis.call('ZCOUNT', K_expiry, '(' .. now, '+inf')
  if redis.call('ZSCORE', K_expiry, SENTINEL) then
    n = n - 1
  end
  return n
end
local function clock(offset_us)
  local t = redis.call('TIME')
  return math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2]) + offset_us) / 1000)
end
local function forget(id)
  redis.call('HDEL', K_info, id)
  redis.call('HDEL', K_state, id)
  redis.call('HDEL', K_queues, id)
  redis.call('HDEL', K_held, id)
  redis.call('ZREM', K_expiry, id)
  redis.call('ZREM', K_ids, id)
end
-- sweep forgets up to limit workers expired by now.
local function sweep(now, limit)
  local old = redis.call('ZRANGEBYSCORE', K_expiry, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(old) do
    forget(id)
  end
end
-- items reads " a b " into a list (first sighting first) and a set.
local function items(s)
  local arr, set = {}, {}
  for x in string.gmatch(s or '', '%S+') do
    if not set[x] then
      arr[#arr + 1] = x
      set[x] = true
    end
  end
  return arr, set
end
local function join(arr)
  if #arr == 0 then
    return ' '
  end
  return ' ' .. table.concat(arr, ' ') .. ' '
end
`

// touchScript registers or refreshes one worker.
// ARGV: offset_us, id, ttl_ms (0: the worker's own, or default_ttl_ms for a
// new one), default_ttl_ms, max_workers, sweep, info (empty: kept),
// queue (a queue the worker claimed from, or empty), max_queues, mode
// (held jobs: 'keep', 'set', 'add' or 'del'), max_held, info_nx ('1':
// info is written only for a worker without one), then the jobs
// ("queue/id"). Answers {1, now ms, started ms, ttl ms}, or {0, live workers}
// when the worker is new and max_workers are live: nothing written.
var touchScript = redis.NewScript(common + `
local offset, id, ttl, default_ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local max_workers, sweep_n = tonumber(ARGV[5]), tonumber(ARGV[6])
local info, q, max_queues, mode, max_held = ARGV[7], ARGV[8], tonumber(ARGV[9]), ARGV[10], tonumber(ARGV[11])
local info_nx = ARGV[12]
if not offset or id == '' or not ttl or ttl < 0 or not default_ttl or default_ttl <= 0 or not max_workers
    or not sweep_n or not max_queues or not max_held
    or (mode ~= 'keep' and mode ~= 'set' and mode ~= 'add' and mode ~= 'del') or (info_nx ~= '0' and info_nx ~= '1') then
  return redis.error_reply('ERR registry: bad arguments to touch')
end
local given = {}
for i = 13, #ARGV do
  given[#given + 1] = ARGV[i]
end
local now = clock(offset)
local exp = redis.call('ZSCORE', K_expiry, id)
local is_live = exp and tonumber(exp) > now
if not is_live then
  local n = live(now)
  if n >= max_workers then
    return {0, n}
  end
end
-- The keys exist from the first registration on (see keys.go): a slot
-- migration then never finds some of them and not the others.
redis.call('HSETNX', K_info, SENTINEL, '')
redis.call('HSETNX', K_state, SENTINEL, '')
redis.call('HSETNX', K_queues, SENTINEL, '')
redis.call('HSETNX', K_held, SENTINEL, '')
redis.call('ZADD', K_expiry, 'NX', '+inf', SENTINEL)
redis.call('ZADD', K_ids, 'NX', 0, SENTINEL)
local started, own_ttl = now, default_ttl
if is_live then
  local s, t = string.match(redis.call('HGET', K_state, id) or '', '^(%d+) %d+ (%d+)$')
  started, own_ttl = tonumber(s) or now, tonumber(t) or default_ttl
else
  forget(id) -- expired and not swept yet: it starts afresh
end
if ttl == 0 then
  ttl = own_ttl
end
sweep(now, sweep_n)
redis.call('HSET', K_state, id, started .. ' ' .. now .. ' ' .. ttl)
if info ~= '' and info_nx == '1' then
  redis.call('HSETNX', K_info, id, info)
elseif info ~= '' then
  redis.call('HSET', K_info, id, info)
end
if q ~= '' then
  local arr, set = items(redis.call('HGET', K_queues, id))
  if not set[q] and #arr < max_queues then
    arr[#arr + 1] = q
  end
  redis.call('HSET', K_queues, id, join(arr))
end
if mode == 'set' then
  redis.call('HSET', K_held, id, join(given))
elseif mode ~= 'keep' then
  local arr, set = items(redis.call('HGET', K_held, id))
  if mode == 'add' then
    for _, x in ipairs(given) do
      if not set[x] and #arr < max_held then
        arr[#arr + 1] = x
        set[x] = true
      end
    end
  else
    local drop = {}
    for _, x in ipairs(given) do
      drop[x] = true
    end
    local kept = {}
    for _, x in ipairs(arr) do
      if not drop[x] then
        kept[#kept + 1] = x
      end
    end
    arr = kept
  end
  redis.call('HSET', K_held, id, join(arr))
end
redis.call('ZADD', K_expiry, now + ttl, id)
redis.call('ZADD', K_ids, 0, id)
return {1, now, started, ttl}`)

// listScript answers a page of the live workers, by id, and how many are
// live. ARGV: offset_us, from (where the page starts, as ZRANGEBYLEX takes
// it: '-', '(' and the last id of the page before, or '[' and an id),
// limit (0: only the count), sweep. Answers {now ms, live,
// next cursor (empty at the end), then six values a worker: id, info, state,
// queues, held, expiry ms}; an absent value is false.
var listScript = redis.NewScript(common + `
local offset, from, limit, sweep_n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local f = string.sub(from, 1, 1)
if not offset or not limit or limit < 0 or not sweep_n or not (from == '-' or f == '(' or f == '[') then
  return redis.error_reply('ERR registry: bad arguments to list')
end
local now = clock(offset)
sweep(now, sweep_n)
local out = {now, live(now), ''}
if limit == 0 then
  return out
end
if from == '-' then
  from = '(' .. SENTINEL -- the sentinel sorts before every id
end
local ids = redis.call('ZRANGEBYLEX', K_ids, from, '+', 'LIMIT', 0, limit + 1)
if #ids > limit then
  out[3] = ids[limit]
end
for i = 1, math.min(#ids, limit) do
  local id = ids[i]
  local exp = redis.call('ZSCORE', K_expiry, id)
  if exp and tonumber(exp) > now then
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', K_info, id)
    out[#out + 1] = redis.call('HGET', K_state, id)
    out[#out + 1] = redis.call('HGET', K_queues, id)
    out[#out + 1] = redis.call('HGET', K_held, id)
    out[#out + 1] = exp
  end
end
return out`)

// removeScript forgets one worker. ARGV: offset_us, id. Answers 1 when it
// was live, else 0.
var removeScript = redis.NewScript(common + `
local offset, id = tonumber(ARGV[1]), ARGV[2]
if not offset or id == '' then
  return redis.error_reply('ERR registry: bad arguments to remove')
end
local now = clock(offset)
local exp = redis.call('ZSCORE', K_expiry, id)
forget(id)
if exp and tonumber(exp) > now then
  return 1
end
return 0`)
