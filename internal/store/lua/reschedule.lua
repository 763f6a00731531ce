-- reschedule.lua: moves a scheduled or pending job to a new due time
-- ("when": "d<µs>" after Redis's now, or "a<score>"); a due time not
-- after now makes it pending. A pending job's old id stays in the list,
-- counted stale (no O(N) LREM). Keys and arguments: specReschedule in
-- internal/store/layout.go.
-- Returns: { code, status, job } (through reply() once it writes): code
--          -1 no such job, 0 not scheduled or pending (status is the
--          job's), 1 done; job packed.
local score = due_of(A_when)
if not score then
  return redis.error_reply('ERR chronoq reschedule: malformed due time')
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local f = load(A_id)
if not f then
  return { -1, '', '' }
end
if f[R_status] == 'scheduled' then
  redis.call('ZREM', K_sched, A_id)
elseif f[R_status] == 'pending' then
  left_pending(A_id, f)
else
  return { 0, f[R_status], '' }
end
local status = schedule(A_id, f, score) -- wakes its claimers when pending
emit('rescheduled', A_id, f[R_kind], status, f[R_attempts])
publish_events()
return reply({ 1, status, packed(A_id, f) })
