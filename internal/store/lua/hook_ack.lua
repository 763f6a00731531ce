-- hook_ack.lua: records how attempts of one subscription's deliveries
-- went: "ok" (delivered: forgotten), "retry" (next attempt delay_ms from
-- now) or "dead" (into the dead list, the oldest past max_dead dropped).
-- An attempt applies only while the delivery is at the attempts given (a
-- lease that lapsed and was taken again is the new attempt's to record).
-- Keys and arguments: store.HookAck in internal/store/ops.go: offset_us,
-- id, max_dead, then per delivery: event key, attempts, outcome, delay_ms,
-- dead (the dead list's JSON of it, for "dead").
-- Returns: the number applied, or -1 when the subscription is gone.
if redis.call('HEXISTS', K_subs, A_id) == 0 then
  return -1
end
local now = clock(A_offset_us)
local n = 0
for i = GROUP_START, #ARGV, GROUP do
  local ek, attempts, outcome = ARGV[i + G_key], tonumber(ARGV[i + G_attempts]), ARGV[i + G_outcome]
  local v = redis.call('HGET', K_ev, ek)
  if v then
    local a, _, job, body = entry(v)
    if a == attempts then
      n = n + 1
      if outcome == 'retry' then
        redis.call('HSET', K_ev, ek, a .. '|' .. (now + tonumber(ARGV[i + G_delay_ms])) .. '|' .. job .. '|' .. body)
      else
        redis.call('HDEL', K_ev, ek)
        redis.call('ZREM', K_pend, ek)
        if outcome == 'dead' then
          redis.call('ZADD', K_dead, now, ek)
          redis.call('HSET', K_deadev, ek, ARGV[i + G_dead])
        end
      end
    end
  end
end
local over = redis.call('ZCARD', K_dead) - tonumber(A_max_dead)
if over > 0 then
  for _, ek in ipairs(redis.call('ZRANGE', K_dead, 0, over - 1)) do
    redis.call('ZREM', K_dead, ek)
    redis.call('HDEL', K_deadev, ek)
  end
end
return n
