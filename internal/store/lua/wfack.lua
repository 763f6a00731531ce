-- wfack.lua: acks outbox entries a releaser has handled: each goes only
-- if it is still the entry read (its SHA1 matches), so that an entry
-- written again since (the job ended again) stays. Keys and arguments:
-- store.WFAck in internal/store/ops.go; per entry: id, the SHA1 of the entry.
-- Returns: the number of entries acked. Safe to run twice.
local n = tonumber(A_n)
if not n then
  return redis.error_reply('ERR chronoq wfack: malformed arguments')
end
local gone = {}
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local id, sum = ARGV[b + G_id], ARGV[b + G_entry]
  local e = redis.call('HGET', K_wfout, id)
  if id ~= SENTINEL and e and redis.sha1hex(e) == sum then
    gone[#gone + 1] = id
  end
end
if #gone > 0 then
  redis.call('HDEL', K_wfout, unpack(gone))
end
return #gone
