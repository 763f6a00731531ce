-- complete.lua: completes claimed jobs whose token is current. A job whose
-- cancellation was requested completes too: its work was done.
-- Keys and arguments: store.Complete in internal/store/ops.go; per job: id,
-- token, result ("" none).
-- Returns: { code_1, ..., code_n }, through reply(): 1 completed, 2 completed before with
--          this token (a repeated call, also once the job is deleted, for
--          tomb_ms), 0 lease lost (a stale token or not processing:
--          nothing changed), -1 no such job, -2 or -3 the artifacts
--          given would pass a cap (see art_merge: nothing changed).
--          With answer "1", n more follow: job_i, job i packed with its
--          artifacts (see packed) as the call left it, when its code is 1
--          or 2 and the job is kept; "" otherwise.
-- Safe to run twice: the second run answers 2 and changes nothing.
local n, cap = tonumber(A_n), tonumber(A_history)
if not n or not cap or not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq complete: malformed arguments')
end
local sets_ok, limited = lease_bind()
if not sets_ok then
  return redis.error_reply(STALE_SETS)
end
local out, finished, bases, expiring, done, saves = {}, {}, {}, {}, {}, {}
local rerun, answer, jobs = false, A_answer == '1', {}
-- Every job's record in one HMGET; an id given twice is read, the second
-- time, as the first left it (seen).
local ids = {}
for i = 0, n - 1 do
  ids[i + 1] = ARGV[GROUP_START + i * GROUP + G_id]
end
local loaded, seen = load_many(ids), {}
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local id, token, result = ARGV[b + G_id], ARGV[b + G_token], ARGV[b + G_result]
  local f = loaded[i + 1]
  if seen[id] ~= nil then
    f = seen[id] or nil
  end
  local code = 1
  -- artifacts given with the complete, merged over the job's (art_merge):
  -- over a cap, code -2 or -3 and the job is left as it was
  local arts, merged, art_code = ARGV[b + G_artifacts], nil, nil
  if arts ~= '' and f and f[R_status] == 'processing' and f[R_token] == token then
    merged, art_code = art_merge(id, arts)
  end
  if not f then
    local tomb = tomb_of(id)
    if tomb and tomb == 'c' .. token then
      code = 2
      rerun = true
    elseif tomb then
      code = 0
    else
      code = -1
    end
  elseif f[R_ack] == 'c' .. token and f[R_token] == token then
    code = 2
    rerun = true
    if answer then
      jobs[i + 1] = packed(id, f, nil, true)
    end
  elseif f[R_status] ~= 'processing' or f[R_token] ~= token then
    code = 0
  elseif art_code then
    code = art_code
  else
    if merged then
      redis.call('HSET', K_data, id .. '.a', merged)
    end
    f[R_status] = 'completed'
    f[R_completed_at_ms] = now_str
    f[R_cancel_requested] = ''
    f[R_lease_until_ms] = ''
    f[R_ack] = 'c' .. token
    if result ~= '' then
      redis.call('HSET', K_data, id .. '.r', result)
    end
    -- its lease ends, and its claim's retry marker goes, once a call
    -- (end_leases)
    lease_ending(id, f, token, finished, bases)
    emit('completed', id, f[R_kind], 'completed', f[R_attempts])
    -- workflows: a node's job leaves its outbox entry (see wf_ended)
    wf_ended(id, f, 'completed')
    hook('completed', id, f, 'completed')
    local kept, stored = retire(id, f, A_retention_ms, expiring, saves)
    if kept then
      if cap > 0 then
        -- by the µs, one apart within a batch: the history keeps its order
        done[#done + 1] = score_of_us(now_us + #finished)
        done[#done + 1] = id
      end
      if answer then
        jobs[i + 1] = packed(id, f, stored, true)
      end
    else
      f = false -- dropped: its tombstone answers a repeat
    end
  end
  if seen[id] == nil then
    seen[id] = f or false
  end
  out[#out + 1] = code
end
if #saves > 0 then
  redis.call('HSET', K_jobs, unpack(saves))
end
if answer then
  for i = 1, n do
    out[n + i] = jobs[i] or ''
  end
end
if #finished > 0 then
  end_leases(finished, bases, limited)
  if #expiring > 0 then
    redis.call('ZADD', K_expiry, unpack(expiring))
  end
  if #done > 0 then
    redis.call('ZADD', K_done, unpack(done))
    local excess = redis.call('ZCARD', K_done) - 1 - cap
    if excess > 0 then
      redis.call('ZREMRANGEBYRANK', K_done, '0', int_str(excess - 1))
    end
  end
  count(M_completed, #finished)
end
publish_events()
if rerun then
  wf_rerun()
  return rerun_reply(out, nil, { K_expiry })
end
return reply(out)
