-- release.lua: hands a claimed job whose token is current straight back to
-- the head of pending, or, when it was claimed ahead of its due time (see
-- claim.lua) and that time has not come, to the scheduled set at it. A job
-- whose cancellation was requested is canceled instead. Keys and
-- arguments: store.Release in internal/store/ops.go.
-- Returns: 1 released (or canceled), through reply(); 2 released before
--          with this token (a repeated call), 0 lease lost, -1 no such job.
if not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq release: malformed arguments')
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local f = load(A_id)
if not f then
  local tomb = tomb_of(A_id)
  if tomb == 'r' .. A_token then
    wf_rerun()
    return rerun_reply(2, nil, { K_expiry })
  elseif tomb then
    return 0
  end
  return -1
end
if f[R_ack] == 'r' .. A_token and f[R_token] == A_token then
  wf_rerun()
  return rerun_reply(2, nil, { K_expiry })
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return 0
end
end_claim(A_id, f, A_token)
if f[R_cancel_requested] == '1' then
  cancel_now(A_id, f, '', A_retention_ms)
  publish_events()
  return reply(1)
end
-- A job claimed ahead has a claimed_at after its due time (see claim.lua):
-- before that it waits for it again, never earlier.
local due_us = (tonumber(f[R_claimed_at_ms]) or 0) * 1000 - 1
if due_us > now_us then
  schedule(A_id, f, score_of_us(due_us))
  emit('released', A_id, f[R_kind], 'scheduled', f[R_attempts])
  publish_events()
  return reply(1)
end
f[R_status] = 'pending'
to_pending(A_id, f[R_labels], f[R_flow])
save(A_id, f)
flush_pending(true, true) -- the head of its pending list
emit('released', A_id, f[R_kind], 'pending', f[R_attempts])
publish_events()
return reply(1)
