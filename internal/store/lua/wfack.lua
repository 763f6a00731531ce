-- wfack.lua: acks outbox entries a releaser has handled: each goes only
-- if it is still the entry read (its SHA1 matches), so that an entry
-- written again since (the job ended again) stays. An entry acked now
-- whose end ended workflows (ended) writes their workflow.ended events to
-- the hooks outbox (common.lua's hook_wf), in the same script as the ack:
-- an end is acked once, so its events are written once.
-- Keys and arguments: store.WFAck in internal/store/ops.go; per entry:
-- id, the SHA1 of the entry, ended ("<workflow>|<status>|<ended ms>",
-- comma-joined, "" none).
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
    if ARGV[b + G_ended] ~= '' then
      local outcome = string.match(e, '^[^%z]*%z([^%z]*)')
      local f = load(id)
      for wf, status, ms in string.gmatch(ARGV[b + G_ended], '([^|,]+)|([^|,]+)|([^|,]+)') do
        hook_wf(id, f, outcome or '', wf, status, ms)
      end
    end
  end
end
if #gone > 0 then
  redis.call('HDEL', K_wfout, unpack(gone))
end
return #gone
