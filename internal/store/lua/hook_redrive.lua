-- hook_redrive.lua: sends dead deliveries of one subscription again: each
-- leaves the dead list and is pending again, after every delivery pending
-- now, with its attempts from 0.
-- Keys and arguments: store.HookRedrive in internal/store/ops.go: id, then
-- per delivery its event key, job and body.
-- Returns: the number moved (one not in the dead list is skipped), or -1
-- when the subscription is gone.
if redis.call('HEXISTS', K_subs, A_id) == 0 then
  return -1
end
local n = 0
for i = GROUP_START, #ARGV, GROUP do
  local ek = ARGV[i + G_key]
  if redis.call('ZREM', K_dead, ek) == 1 then
    redis.call('HDEL', K_deadev, ek)
    redis.call('HSET', K_ev, ek, '0|0|' .. ARGV[i + G_job] .. '|' .. ARGV[i + G_body])
    redis.call('ZADD', K_pend, redis.call('INCR', K_seq), ek)
    n = n + 1
  end
end
return n
