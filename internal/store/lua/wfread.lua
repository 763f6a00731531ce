-- wfread.lua: reads a page of the queue's outbox (see wf_ended in
-- common.lua) from cursor. Keys and arguments: specWFRead in
-- internal/store/layout.go. Writes nothing.
-- Returns: { now_us, next_cursor, id_1, entry_1, ... }: now_us is the seq
--          of a park of the outbox index (see attention.go); next_cursor
--          "0" when the scan is over.
local page = tonumber(A_count)
if not page or not tonumber(A_cursor) then
  return redis.error_reply('ERR chronoq wfread: malformed arguments')
end
local r = redis.call('HSCAN', K_wfout, A_cursor, 'COUNT', page)
local out = { now_us, r[1] }
local kv = r[2]
for i = 1, #kv, 2 do
  if kv[i] ~= SENTINEL then
    out[#out + 1] = kv[i]
    out[#out + 1] = kv[i + 1]
  end
end
return out
