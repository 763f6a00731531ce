-- artifacts.lua: sets artifacts of a claimed job whose token is current,
-- over those it has (a name given again is replaced). Keys and arguments:
-- store.Artifacts in internal/store/ops.go; artifacts is a compact JSON object
-- (see art_merge).
-- Returns: 1 set, 0 lease lost (a stale token or not processing: nothing
--          changed), -1 no such job, -2 more than ART_MAX_COUNT artifacts,
--          -3 more than ART_MAX_BYTES (nothing changed).
-- Publishes an "artifact" event once it set them.
-- Safe to run twice: a rerun sets the same values again (and publishes
-- again).
if string.sub(A_artifacts, 1, 1) ~= '{' then
  return redis.error_reply('ERR chronoq artifacts: malformed arguments')
end
local f = load(A_id)
if not f then
  return -1
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return 0
end
local merged, code = art_merge(A_id, A_artifacts)
if not merged then
  return code
end
redis.call('HSET', K_data, A_id .. '.a', merged)
-- an "artifact" event: a job's stream reads the artifacts again
emit('artifact', A_id, f[R_kind], f[R_status], f[R_attempts])
publish_events()
return 1
