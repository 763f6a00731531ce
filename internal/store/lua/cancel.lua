-- cancel.lua: cancels a job, or deletes one that has ended.
--   scheduled, pending, waiting -> canceled (a pending job's id stays in the list,
--                         counted stale, until a claim pops and drops it:
--                         no O(N) LREM); kept for its retention
--   processing         -> cancel_requested: its worker sees it on its next
--                         heartbeat; whatever ends the attempt then ends
--                         the job canceled (fail, release, a lapsed
--                         lease), except a complete: the work was done
--   completed, dead, canceled -> deleted, with its idempotency record
-- With a claim token it is the worker of a processing job ending it as
-- canceled, fenced by the token like complete.lua.
-- Keys and arguments: store.Cancel in internal/store/ops.go; request is remembered
-- on the canceled job so that a repeated call answers as the first.
-- Returns: { code, status, job }, through reply() when it wrote, with code -1 no such job, 0 conflict
--          (status is the job's; with a claim token: not the current
--          claim), 1 canceled, 2 canceled before by this request or token
--          (a repeated call), 3 cancellation requested (processing), 4
--          deleted; and job packed (see common.lua) after the change
--          (before it, when deleted), "" when there is none.
local id, req, claim = A_id, A_request, A_claim_token
if not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq cancel: malformed arguments')
end
local sets_ok, limited = lease_bind()
if not sets_ok then
  return redis.error_reply(STALE_SETS)
end
local f = load(id)
if not f then
  local tomb = tomb_of(id)
  if claim ~= '' and tomb == 'x' .. claim then
    wf_rerun()
    return rerun_reply({ 2, 'canceled', '' }, nil, { K_expiry })
  end
  return { -1, '', '' }
end
local status = f[R_status]
if claim ~= '' then
  if f[R_ack] == 'x' .. claim then
    wf_rerun()
    return rerun_reply({ 2, status, packed(id, f) }, nil, { K_expiry })
  end
  if status ~= 'processing' or f[R_token] ~= claim then
    return { 0, status, '' }
  end
  redis.call('ZREM', K_leases, id)
  lease_ended(id, f)
  lease_freed(1, limited)
  finish_claim(claim)
  f[R_ack] = 'x' .. claim
  cancel_now(id, f, req, A_retention_ms)
  local out = { 1, 'canceled', packed(id, f) }
  publish_events()
  return reply(out)
end
if status == 'canceled' and f[R_cancel_token] == req then
  wf_rerun()
  return rerun_reply({ 2, status, packed(id, f) }, nil, { K_expiry })
end
if status == 'scheduled' or status == 'pending' or status == 'waiting' then
  if status == 'scheduled' then
    redis.call('ZREM', K_sched, id)
  elseif status == 'pending' then
    left_pending(id, f)
  end -- a waiting job (a workflow node's, see wfnode.lua) is in no list
  cancel_now(id, f, req, A_retention_ms)
  local out = { 1, 'canceled', packed(id, f) }
  publish_events()
  return reply(out)
elseif status == 'processing' then
  f[R_cancel_requested] = '1'
  save(id, f)
  return { 3, status, packed(id, f) }
elseif status == 'completed' or status == 'dead' or status == 'canceled' then
  local before = packed(id, f)
  if status == 'dead' then
    redis.call('ZREM', K_dead, id)
  elseif status == 'completed' then
    redis.call('ZREM', K_done, id)
  end
  drop(id, f)
  emit('deleted', id, f[R_kind], status, f[R_attempts])
  publish_events()
  return reply({ 4, status, before })
end
return { 0, status, '' }
