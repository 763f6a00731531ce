-- runnow.lua: makes a scheduled or dead job pending now. A dead job starts
-- its attempts again from 0 (its fence goes on growing). Keys and
-- arguments: store.RunNow in internal/store/ops.go.
-- Returns: { code, status, job }: -1 no such job, 0 neither scheduled nor
--          dead nor pending (status is the job's), 1 done, 2 pending
--          already (nothing changed); job packed.
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local f = load(A_id)
if not f then
  return { -1, '', '' }
end
if f[R_status] == 'pending' then
  return { 2, 'pending', packed(A_id, f) }
end
to_pending(A_id, f[R_labels], f[R_flow]) -- (raises before the first write for a set not declared)
if f[R_status] == 'scheduled' then
  redis.call('ZREM', K_sched, A_id)
elseif f[R_status] == 'dead' then
  redis.call('ZREM', K_dead, A_id)
  f[R_attempts] = 0
  f[R_died_at_ms], f[R_token], f[R_lease_until_ms], f[R_cancel_requested] = '', '', '', ''
  count(M_requeued, 1)
else
  return { 0, f[R_status], '' }
end
f[R_status] = 'pending'
f[R_run_at_ms] = now
save(A_id, f)
flush_pending(false, true)
emit('run_now', A_id, f[R_kind], 'pending', f[R_attempts])
publish_events()
return { 1, 'pending', packed(A_id, f) }
