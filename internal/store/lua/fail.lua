-- fail.lua: records a failed attempt of a claimed job whose token is
-- current: a retry after the job's backoff (or at retry_at), the dead set
-- when its attempts are spent or dead is "1", or canceled when its
-- cancellation was requested. Keys and arguments: specFail in
-- internal/store/layout.go; retry_at is "-1" for now + the backoff, a due
-- score, or "d<µs>" a delay after Redis's now (see due_of); jitter a
-- number in [0, 1) for the backoff's jitter.
-- Returns: { code, status, run_at_ms, due } (through reply() once it
--          writes): code 1 done, 2 this token's failure was recorded
--          before (a repeated call; status is the job's status now), 0
--          lease lost, -1 no such job; due the retry's due score.
-- The backoff formula is queue.Backoff.Delay's; a test holds them equal.
local retry_at, jitter = A_retry_at, tonumber(A_jitter)
local dead_max, dead_age = tonumber(A_dead_max), tonumber(A_dead_age_ms)
if retry_at ~= '-1' and string.sub(retry_at, 1, 1) == 'd' then
  retry_at = due_of(retry_at) or 'malformed'
end
if not jitter or not dead_max or not dead_age or (retry_at ~= '-1' and not tonumber(retry_at))
    or not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq fail: malformed arguments')
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local f = load(A_id)
if not f then
  local tomb = tomb_of(A_id)
  if tomb == 'f' .. A_token then
    wf_rerun()
    return rerun_reply({ 2, '', 0, '' }, K_sched, { K_expiry }, K_dead, dead_age)
  elseif tomb then
    return { 0, '', 0, '' }
  end
  return { -1, '', 0, '' }
end
if f[R_ack] == 'f' .. A_token and f[R_token] == A_token then
  local due = ''
  if f[R_status] == 'scheduled' then
    due = redis.call('ZSCORE', K_sched, A_id) or ''
  end
  wf_rerun()
  return rerun_reply({ 2, f[R_status], tonumber(f[R_run_at_ms]) or 0, due }, K_sched, { K_expiry }, K_dead, dead_age)
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return { 0, f[R_status], 0, '' }
end
local attempts, max_attempts = tonumber(f[R_attempts]), spec_max_attempts(f[R_spec])
local initial, factor, maxd, jit = spec_backoff(f[R_spec])
if not attempts or not max_attempts or not initial or not factor or not maxd or not jit then
  return redis.error_reply('ERR chronoq fail: malformed record of job ' .. A_id)
end

redis.call('ZREM', K_leases, A_id)
lease_ended(A_id, f)
lease_freed(1)
finish_claim(A_token)
f[R_ack] = 'f' .. A_token
f[R_last_error] = A_error
f[R_lease_until_ms] = ''
count(M_failed, 1)
if f[R_cancel_requested] == '1' then
  cancel_now(A_id, f, '', A_retention_ms)
  publish_events()
  return reply({ 1, 'canceled', now, '' })
end
if A_dead == '1' or attempts >= max_attempts then
  kill(A_id, f, A_error, dead_max, dead_age)
  publish_events()
  return reply({ 1, 'dead', now, '' })
end
local score = retry_at
if retry_at == '-1' then
  local d = math.min(initial * factor ^ (attempts - 1), maxd)
  d = math.min(d * (1 + jit * (2 * jitter - 1)), maxd)
  score = score_of_us(now_us + math.floor(d) * 1000)
end
local status = schedule(A_id, f, score) -- wakes its claimers when pending
count(M_retried, 1)
hook('retried', A_id, f, status)
emit('retried', A_id, f[R_kind], status, f[R_attempts])
publish_events()
return reply({ 1, status, tonumber(f[R_run_at_ms]), score })
