-- registry_remove.lua: forgets one worker. Keys and arguments:
-- store.RegistryRemove in internal/store/ops.go. Answers 1 when it was
-- live, else 0.
local offset, id = tonumber(A_offset_us), A_id
if not offset or id == '' then
  return redis.error_reply('ERR registry: bad arguments to remove')
end
local now = clock(offset)
local exp = redis.call('ZSCORE', K_expiry, id)
forget(id)
if exp and tonumber(exp) > now then
  return 1
end
return 0
