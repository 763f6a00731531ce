-- heartbeat.lua: extends the lease of a claimed job whose token is
-- current, to Redis's now + extend_ms (0: the job's visibility), never
-- shortening it. Keys and arguments: specHeartbeat in queue/layout.go.
-- Returns: { code, lease_until_ms, cancel_requested }: code 1 extended, 0
--          lease lost, -1 no such job.
if not tonumber(A_extend_ms) then
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
save(A_id, f)
redis.call('ZADD', K_leases, lease, A_id)
local cancel = 0
if f[R_cancel_requested] == '1' then
  cancel = 1
end
return { 1, lease, cancel }
