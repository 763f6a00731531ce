-- flow_override.lua: sets or deletes one flow key's override (see
-- KeyFOver in internal/store/layout.go). Keys and arguments:
-- store.FlowOverride in internal/store/ops.go: key, value (as
-- queue.FlowOverride encodes it; "" deletes), max (the most overrides a
-- queue holds).
-- The key's place is looked at again under its new limits: a key its old
-- max in flight held out of the ring comes back at once when the new one
-- gives it room (and its waiting claimers are woken).
-- Returns: 1; -1 when the queue does not exist (nothing written); -2
-- when a new override would pass max.
-- Safe to run twice: it sets a value.
local cap = tonumber(A_max)
if not cap then
  return redis.error_reply('ERR chronoq flow_override: malformed arguments')
end
if not exists() then
  return -1
end
if A_value == '' then
  redis.call('HDEL', K_fover, A_key)
elseif redis.call('HEXISTS', K_fover, A_key) == 0 and redis.call('HLEN', K_fover) - 1 >= cap then
  return -2 -- (less the sentinel)
else
  redis.call('HSET', K_fover, A_key, A_value)
end
flow_ready(A_key)
if FLOW_WOKE then
  wake(1)
end
return 1
