-- heartbeat.lua: extends the lease of a claimed job whose token is
-- current, to Redis's now + extend_ms (0: the job's visibility), never
-- shortening it. Keys and arguments: store.Heartbeat in internal/store/ops.go.
-- With progress ("<percent>|<message>", "" none) it also records the
-- job's progress, at Redis's now, and publishes a progress event.
-- Returns: { code, lease_until_ms, cancel_requested }: code 1 extended, 0
--          lease lost, -1 no such job.
local pct, msg = string.match(A_progress, '^([%d.]+)|(.*)$')
if not tonumber(A_extend_ms) or A_progress ~= '' and not (pct and tonumber(pct) and tonumber(pct) <= 100) then
  return redis.error_reply('ERR chronoq heartbeat: malformed arguments')
end
local f = load(A_id)
if not f then
  return { -1, 0, 0 }
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return { 0, 0, 0 }
end
local ext = tonumber(A_extend_ms)
if ext <= 0 then
  ext = spec_visibility(f[R_spec])
end
local lease = math.max(now + ext, tonumber(f[R_lease_until_ms]) or 0)
f[R_lease_until_ms] = lease
if pct then
  f[R_progress] = pct .. '|' .. now_str .. '|' .. msg
  emit('progress', A_id, f[R_kind], f[R_status], f[R_attempts])
end
save(A_id, f)
redis.call('ZADD', K_leases, lease, A_id)
local cancel = 0
if f[R_cancel_requested] == '1' then
  cancel = 1
end
publish_events()
return { 1, lease, cancel }
