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
local sets_ok, limited = lease_bind(true) -- a retry due now is made pending
if not sets_ok then
  return redis.error_reply(STALE_SETS)
end
local jobs, ids = {}, {}
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
  ids[#ids + 1] = j.id
end

local rerun, answer = false, A_answer == '1'
-- Every job's record in one HMGET. The writes of the retries, the most
-- common end, are gathered into one command each after the loop: the
-- records (saves), the schedule (sched), the leases ended (ended) and
-- their claims' retry markers (bases), and the counters. A job named
-- again reads what the call made of it (seen): a retried one its table
-- (its score in f.due, not yet written), a dead or canceled one, written
-- as it ended (kill, cancel_now), read again (false).
local loaded, seen = load_many(ids), {}
local saves, sched, ended, bases = {}, {}, {}, {}
local failed, retried, pended, cut = 0, 0, false, tonumber(cutoff)
-- specs: a spec's attempts and backoff, read once a spec (most jobs of a
-- batch share one): { max_attempts, initial, factor, max, jitter }, false
-- when malformed
local specs = {}

-- The loop is written out, without a function a job: a closure over
-- these locals would cost each call its upvalues.
local out = {}
for i, j in ipairs(jobs) do
  local id, token = j.id, j.token
  local f, s = loaded[i], seen[id]
  if s == false then
    f = load(id)
  elseif s then
    f = s
  end
  -- j's answer: code, status, run_at_ms and due
  local code, status, run_at, due = 1, '', 0, ''
  repeat
    if not f then
      local tomb = tomb_of(id)
      if tomb == 'f' .. token then
        code, rerun = 2, true
      elseif tomb then
        code = 0
      else
        code = -1
      end
      break
    end
    if f[R_ack] == 'f' .. token and f[R_token] == token then
      code, status, run_at, rerun = 2, f[R_status], tonumber(f[R_run_at_ms]) or 0, true
      if status == 'scheduled' then
        due = f.due or redis.call('ZSCORE', K_sched, id) or ''
      end
      break
    end
    if f[R_token] ~= token or f[R_status] ~= 'processing' then
      code, status = 0, f[R_status]
      break
    end
    local attempts, sp = tonumber(f[R_attempts]), specs[f[R_spec]]
    if sp == nil then
      local initial, factor, maxd, jit = spec_backoff(f[R_spec])
      sp = { spec_max_attempts(f[R_spec]), initial, factor, maxd, jit }
      if not (sp[1] and initial and factor and maxd and jit) then
        sp = false
      end
      specs[f[R_spec]] = sp
    end
    if not attempts or not sp then
      code, status = -4, f[R_status] -- its record is malformed: left as it is (queue's codeMalformed)
      break
    end

    -- its lease ends (with end_leases after the loop)
    lease_ending(id, f, token, ended, bases)
    f[R_ack] = 'f' .. token
    f[R_lease_until_ms] = ''
    f[R_last_error] = j.error
    failed = failed + 1
    if f[R_cancel_requested] == '1' then
      cancel_now(id, f, '', A_retention_ms)
      seen[id] = false
      status, run_at = 'canceled', now
      break
    end
    if j.dead == '1' or attempts >= sp[1] then
      kill(id, f, j.error, dead_max, dead_age)
      seen[id] = false
      status, run_at = 'dead', now
      break
    end
    local score = j.retry_at
    if score == '-1' then
      local d = math.min(sp[2] * sp[3] ^ (attempts - 1), sp[4])
      d = math.min(d * (1 + sp[5] * (2 * j.jitter - 1)), sp[4])
      score = score_of_us(now_us + math.floor(d) * 1000)
    end
    -- schedule's steps, the writes gathered
    local at = tonumber(score)
    if at <= cut then
      status, pended, run_at = 'pending', true, now
      f[R_run_at_ms] = now_str -- due already: it runs from now
      to_pending(id, f[R_labels], f[R_flow])
    else
      status, run_at, due = 'scheduled', math.floor(at), score
      f[R_run_at_ms] = int_str(run_at)
      note_due(at)
      sched[#sched + 1] = score
      sched[#sched + 1] = id
      f.due = score
    end
    f[R_status] = status
    saves[#saves + 1] = id
    saves[#saves + 1] = encode(f)
    seen[id] = f
    retried = retried + 1
    hook('retried', id, f, status)
    emit('retried', id, f[R_kind], status, f[R_attempts])
  until true
  out[#out + 1] = code
  out[#out + 1] = status
  out[#out + 1] = run_at
  out[#out + 1] = due
end
if #saves > 0 then
  redis.call('HSET', K_jobs, unpack(saves))
end
if #sched > 0 then
  redis.call('ZADD', K_sched, unpack(sched))
end
if pended then
  flush_pending(false, true) -- the retries due now, waking their claimers
end
end_leases(ended, bases, limited)
count(M_failed, failed)
count(M_retried, retried)
if answer then
  -- read once every failure is recorded: a job named twice is answered
  -- as the call left it
  for i, j in ipairs(jobs) do
    local code = out[4 * i - 3]
    local f = (code == 1 or code == 2) and load(j.id)
    out[#out + 1] = f and packed(j.id, f, nil, true) or ''
  end
end
publish_events()
if rerun then
  wf_rerun()
  return rerun_reply(out, K_sched, { K_expiry }, K_dead, dead_age)
end
return reply(out)
