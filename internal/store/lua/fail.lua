-- fail.lua: records failed attempts of claimed jobs whose token is
-- current: each a retry after the job's backoff (or at retry_at), the
-- dead set when its attempts are spent or dead is "1", or canceled when
-- its cancellation was requested. Keys and arguments: store.Fail in
-- internal/store/ops.go; per job: id, token, error, retry_at ("-1" for
-- now + the backoff, a due score, or "d<µs>" a delay after Redis's now:
-- see due_of), dead ("1" or "0") and jitter (a number in [0, 1) for the
-- backoff's jitter).
-- Returns: { code_1, status_1, run_at_ms_1, due_1, ..., due_n }, through
--          reply(): code 1 done, 2 this token's failure was recorded
--          before (a repeated call; status is the job's status now), 0
--          lease lost, -1 no such job, -4 its record is malformed
--          (nothing changed); due the retry's due score ("" none).
--          With answer "1", n more follow: job_i, job i packed with its
--          artifacts (see packed) as the call left it, when its code is 1
--          or 2 and the job is kept; "" otherwise.
-- The backoff formula is queue.Backoff.Delay's; a test holds them equal.
-- Safe to run twice: the second run answers 2 and changes nothing.
local n, dead_max, dead_age = tonumber(A_n), tonumber(A_dead_max), tonumber(A_dead_age_ms)
if not n or not dead_max or not dead_age or not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq fail: malformed arguments')
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local jobs = {}
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local j = { id = ARGV[b + G_id], token = ARGV[b + G_token], error = ARGV[b + G_error],
    retry_at = ARGV[b + G_retry_at], dead = ARGV[b + G_dead], jitter = tonumber(ARGV[b + G_jitter]) }
  if string.sub(j.retry_at, 1, 1) == 'd' then
    j.retry_at = due_of(j.retry_at) or 'malformed'
  end
  if not j.jitter or (j.retry_at ~= '-1' and not tonumber(j.retry_at)) then
    return redis.error_reply('ERR chronoq fail: malformed job ' .. i)
  end
  jobs[#jobs + 1] = j
end

local rerun, answer = false, A_answer == '1'
-- fail_one records j's failure and answers its code, status, run_at_ms
-- and due.
local function fail_one(j)
  local id, token = j.id, j.token
  local f = load(id)
  if not f then
    local tomb = tomb_of(id)
    if tomb == 'f' .. token then
      rerun = true
      return 2, '', 0, ''
    elseif tomb then
      return 0, '', 0, ''
    end
    return -1, '', 0, ''
  end
  if f[R_ack] == 'f' .. token and f[R_token] == token then
    rerun = true
    local due = ''
    if f[R_status] == 'scheduled' then
      due = redis.call('ZSCORE', K_sched, id) or ''
    end
    return 2, f[R_status], tonumber(f[R_run_at_ms]) or 0, due
  end
  if f[R_token] ~= token or f[R_status] ~= 'processing' then
    return 0, f[R_status], 0, ''
  end
  local attempts, max_attempts = tonumber(f[R_attempts]), spec_max_attempts(f[R_spec])
  local initial, factor, maxd, jit = spec_backoff(f[R_spec])
  if not attempts or not max_attempts or not initial or not factor or not maxd or not jit then
    return -4, f[R_status], 0, '' -- its record is malformed: left as it is (queue's codeMalformed)
  end

  end_claim(id, f, token, 'f')
  f[R_last_error] = j.error
  count(M_failed, 1)
  if f[R_cancel_requested] == '1' then
    cancel_now(id, f, '', A_retention_ms)
    return 1, 'canceled', now, ''
  end
  if j.dead == '1' or attempts >= max_attempts then
    kill(id, f, j.error, dead_max, dead_age)
    return 1, 'dead', now, ''
  end
  local score = j.retry_at
  if score == '-1' then
    local d = math.min(initial * factor ^ (attempts - 1), maxd)
    d = math.min(d * (1 + jit * (2 * j.jitter - 1)), maxd)
    score = score_of_us(now_us + math.floor(d) * 1000)
  end
  local status = schedule(id, f, score) -- wakes its claimers when pending
  count(M_retried, 1)
  hook('retried', id, f, status)
  emit('retried', id, f[R_kind], status, f[R_attempts])
  return 1, status, tonumber(f[R_run_at_ms]), score
end

local out, answered = {}, {}
for i, j in ipairs(jobs) do
  local code, status, run_at, due = fail_one(j)
  out[#out + 1] = code
  out[#out + 1] = status
  out[#out + 1] = run_at
  out[#out + 1] = due
  answered[i] = code == 1 or code == 2
end
if answer then
  -- read once every failure is recorded: a job named twice is answered
  -- as the call left it
  for i, j in ipairs(jobs) do
    local f = answered[i] and load(j.id)
    out[#out + 1] = f and packed(j.id, f, nil, true) or ''
  end
end
publish_events()
if rerun then
  wf_rerun()
  return rerun_reply(out, K_sched, { K_expiry }, K_dead, dead_age)
end
return reply(out)
