-- registry_common.lua: the definitions the worker registry's scripts
-- (registry_*.lua) use; each is sent with those its body uses, as a queue
-- script is with common.lua's. The registry's keys and SENTINEL come from
-- the prelude (see registryKeys in internal/store/ops.go).
-- live counts the workers live at now (the sentinel, at +inf, is not one).
local function live(now)
  local n = redis.call('ZCOUNT', K_expiry, '(' .. now, '+inf')
  if redis.call('ZSCORE', K_expiry, SENTINEL) then
    n = n - 1
  end
  return n
end
-- clock is Redis's now in ms, plus offset_us (a test's fake clock).
local function clock(offset_us)
  local t = redis.call('TIME')
  return math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2]) + offset_us) / 1000)
end
-- forget drops worker id from every key.
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
-- join writes a list as items reads it.
local function join(arr)
  if #arr == 0 then
    return ' '
  end
  return ' ' .. table.concat(arr, ' ') .. ' '
end
