-- reclaim.lua: the queue's housekeeping by Redis's clock, one bounded
-- batch of each:
-- 1. Jobs whose lease has lapsed (their worker is gone): back to the head
--    of pending with attempts kept, dead when their attempts are spent (a
--    job that kills its worker each time must not loop for ever), or
--    canceled when their cancellation was requested. The claim token is
--    cleared, so the lost worker's late calls answer lease lost.
-- 2. Jobs whose time is up (retention, tombstones), with their
--    idempotency records.
-- 3. Dead jobs past the dead set's age or count.
-- Keys and arguments: store.Reclaim in internal/store/ops.go.
-- Returns: { more, next, now_us, wf, id_1, ..., id_k }: more 1 when work may
--          remain; next the Unix ms its next work falls due (a lease
--          deadline, a retention end, a dead job's age; now when more is
--          1; 0 when it holds none of these), for the sweep index (see
--          queue/attention.go); wf the outbox mark (see wf_ended in
--          common.lua; 0 none); and the ids taken back from lapsed leases.
-- Safe to run twice: a second run finds only what is still due.
local limit, dead_max, dead_age = tonumber(A_limit), tonumber(A_dead_max), tonumber(A_dead_age_ms)
if not limit or not dead_max or not dead_age or not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq reclaim: malformed arguments')
end
if not exists() then
  return { 0, 0, now_us, 0 }
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
-- This pass's park may raise the queue's sweep entry: the next sweep mark
-- goes whatever the hint said (see sweep_mark in common.lua).
redis.call('HDEL', K_meta, M_sweep_hint)
-- A queue made by a version before workflows gets its outbox here (every
-- key a script declares must exist, see create.lua).
redis.call('HSETNX', K_wfout, SENTINEL, '')
if redis.call('EXISTS', K_hookout) == 0 then
  redis.call('XADD', K_hookout, HOOK_SENTINEL, 'n', SENTINEL) -- so does the hooks outbox (see create.lua)
end
local out = { 0, 0, now_us, 0 }

local expired = redis.call('ZRANGEBYSCORE', K_leases, '-inf', now_str, 'LIMIT', '0', int_str(limit))
for _, id in ipairs(expired) do
  local f = load(id)
  if f then
    pending_of(f[R_labels]) -- every job's set is declared, checked before the first write
  end
end
lease_freed(#expired)
local back = 0
for _, id in ipairs(expired) do
  redis.call('ZREM', K_leases, id)
  local f = load(id)
  if f and f[R_status] == 'processing' then
    local attempts, max_attempts = tonumber(f[R_attempts]) or 0, spec_max_attempts(f[R_spec]) or 0
    finish_claim(f[R_token])
    lease_ended(id, f)
    f[R_token] = ''
    f[R_lease_until_ms] = ''
    if f[R_cancel_requested] == '1' then
      cancel_now(id, f, '', A_retention_ms)
    elseif attempts >= max_attempts then
      kill(id, f, 'lease expired: worker lost during attempt ' .. attempts .. ' of ' .. max_attempts, dead_max, dead_age)
    else
      f[R_status] = 'pending'
      save(id, f)
      to_pending(id, f[R_labels], f[R_flow])
      back = back + 1
      emit('reclaimed', id, f[R_kind], 'pending', f[R_attempts])
    end
    out[#out + 1] = id
  end
end
if back > 0 then
  flush_pending(true, true) -- the heads of their pending lists
end
count(M_reclaimed, #out - 4)
if #expired == limit then
  out[1] = 1
end

local due = redis.call('ZRANGEBYSCORE', K_expiry, '-inf', now_str, 'LIMIT', '0', int_str(limit))
for _, m in ipairs(due) do
  redis.call('ZREM', K_expiry, m)
  local f = load(m)
  if f then
    if f[R_status] == 'completed' or f[R_status] == 'canceled' then
      redis.call('ZREM', K_done, m)
      drop(m, f)
    end
  elseif tomb_of(m) then
    redis.call('HDEL', K_jobs, m)
  end
end
if #due == limit then
  out[1] = 1
end
if trim_dead(dead_max, dead_age) == 100 then
  out[1] = 1
end
if out[1] == 1 or redis.call('ZCARD', K_dead) - 1 > dead_max then
  out[2] = now
else
  -- read afresh: head_of's may be of before this script's removals
  local next = math.min(first_score(K_leases), first_score(K_expiry), first_score(K_dead) + dead_age)
  if next < math.huge then
    out[2] = math.floor(next)
  end
end
out[4] = math.floor(marks.wf or 0)
publish_events()
return out
