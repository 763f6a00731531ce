-- hook_claim.lua: takes the deliveries of one subscription that may be
-- sent now: the oldest pending delivery of each job (a job's deliveries
-- go one after another, in the order they were fanned out) whose next
-- attempt is due, up to max; each is leased for lease_ms (its next
-- attempt set then), so no other dispatcher sends it meanwhile, and its
-- attempts counted.
-- Keys and arguments: store.HookClaim in internal/store/ops.go: offset_us,
-- id, scan (how many of the oldest pending deliveries are looked at), max,
-- lease_ms.
-- Returns: { now ms, pending, next (the ms the earliest one not taken is
-- due, -1 none), then three values a delivery: event key, attempts (this
-- one counted), body }, or { -1 } when the subscription is gone.
if redis.call('HEXISTS', K_subs, A_id) == 0 then
  return { -1 }
end
local now = clock(A_offset_us)
local max, lease = tonumber(A_max), tonumber(A_lease_ms)
local keys = redis.call('ZRANGE', K_pend, 0, tonumber(A_scan) - 1)
local out = { now, redis.call('ZCARD', K_pend), -1 }
local seen = {}
local taken = 0
for _, ek in ipairs(keys) do
  local v = redis.call('HGET', K_ev, ek)
  if v then
    local a, n, job, body = entry(v)
    if not seen[job] then
      seen[job] = true
      if n <= now and taken < max then
        taken = taken + 1
        redis.call('HSET', K_ev, ek, (a + 1) .. '|' .. (now + lease) .. '|' .. job .. '|' .. body)
        out[#out + 1] = ek
        out[#out + 1] = a + 1
        out[#out + 1] = body
      elseif n > now and (out[3] == -1 or n < out[3]) then
        out[3] = n
      end
    end
  else
    redis.call('ZREM', K_pend, ek) -- no entry: nothing to send
  end
end
return out
