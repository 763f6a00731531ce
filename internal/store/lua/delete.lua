-- delete.lua: deletes a queue: every key of it, so every job in every
-- state. With a job processing it answers busy and deletes nothing, unless
-- force is "1" (then that worker's later calls find no job). With idle_ms
-- > 0 it is the sweep forgetting an idle queue: it deletes the queue only
-- when it holds no job at all and nothing was enqueued for idle_ms.
-- Keys and arguments: store.Delete in internal/store/ops.go. Deleting is the one
-- thing that empties keys: nothing writes them again in this script.
-- Returns: 1 deleted, 0 busy (or not idle), -1 no such queue.
local force, idle = A_force == '1', tonumber(A_idle_ms)
if not idle then
  return redis.error_reply('ERR chronoq delete: malformed arguments')
end
if not exists() then
  return -1
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
if idle > 0 then
  local last = tonumber(redis.call('HGET', K_meta, M_active_ms) or redis.call('HGET', K_meta, M_created_ms))
  if redis.call('HLEN', K_jobs) > 1 or last + idle > now then
    return 0
  end
elseif not force and redis.call('ZCARD', K_leases) > 1 then
  return 0
end
-- with the label sets' lists and wake streams (the keys after NKEYS)
redis.call('UNLINK', K_meta, K_jobs, K_data, K_sched, K_pending, K_leases, K_dead, K_done, K_idem, K_expiry, K_claims, K_wake,
  K_lsets, K_wfout, K_hookout, K_fpend, K_frun, K_fring, K_fwait, K_flow, K_fover, K_fcount, unpack(KEYS, NKEYS + 1))
return 1
