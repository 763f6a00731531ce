-- registry_touch.lua: registers or refreshes one worker. Keys and
-- arguments: store.RegistryTouch in internal/store/ops.go: ttl_ms (0: the
-- worker's own, or default_ttl_ms for a new one), info (empty: kept),
-- queue (a queue the worker claimed from, or empty), mode (held jobs:
-- 'keep', 'set', 'add' or 'del'), info_nx ('1': info is written only for
-- a worker without one), then the jobs ("queue/id"). Answers {1, now ms,
-- started ms, ttl ms}, or {0, live workers} when the worker is new and
-- max_workers are live: nothing written.
local offset, id, ttl, default_ttl = tonumber(A_offset_us), A_id, tonumber(A_ttl_ms), tonumber(A_default_ttl_ms)
local max_workers, sweep_n = tonumber(A_max_workers), tonumber(A_sweep)
local info, q, max_queues, mode, max_held = A_info, A_queue, tonumber(A_max_queues), A_mode, tonumber(A_max_held)
local info_nx, n = A_info_nx, tonumber(A_n)
if not n or not offset or id == '' or not ttl or ttl < 0 or not default_ttl or default_ttl <= 0 or not max_workers
    or not sweep_n or not max_queues or not max_held
    or (mode ~= 'keep' and mode ~= 'set' and mode ~= 'add' and mode ~= 'del') or (info_nx ~= '0' and info_nx ~= '1') then
  return redis.error_reply('ERR registry: bad arguments to touch')
end
local given = {}
for i = 0, n - 1 do
  given[#given + 1] = ARGV[GROUP_START + i * GROUP + G_job]
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
-- migration then never finds some of them and not the others. This
-- script writes the six sentinels together, so the expiry's stands for
-- all of them: a worker's sighting that finds it (most, and every one of
-- a live worker) writes none.
if not is_live or not redis.call('ZSCORE', K_expiry, SENTINEL) then
  redis.call('HSETNX', K_info, SENTINEL, '')
  redis.call('HSETNX', K_state, SENTINEL, '')
  redis.call('HSETNX', K_queues, SENTINEL, '')
  redis.call('HSETNX', K_held, SENTINEL, '')
  redis.call('ZADD', K_expiry, 'NX', '+inf', SENTINEL)
  redis.call('ZADD', K_ids, 'NX', 0, SENTINEL)
end
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
    redis.call('HSET', K_queues, id, join(arr))
  end
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
return {1, now, started, ttl}
