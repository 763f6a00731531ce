-- wait.lua: the first half of a blocking peek: answers whether the queue
-- is paused and how many jobs are pending (and claimable under the queue's
-- limits), and when none is, marks that a
-- claimer is about to wait wait_ms on the wake stream and answers the
-- stream's last entry to wait after. Keys and arguments: specWait in
-- queue/layout.go.
-- Returns: { paused, pending }, or { 0, 0, at } when jobs are pending but
-- the queue's limits let no claim take one now: look again at at (ms,
-- Redis's clock), or, when at is "" (the queue is at its MaxInFlight), on
-- the wake stream (an ended lease writes to it). A claimer waits on the
-- stream through its group (see wakeGroup in layout.go).
local wait_ms = tonumber(A_wait_ms)
if not wait_ms then
  return redis.error_reply('ERR chronoq wait: malformed arguments')
end
if not exists() then
  return { 0, 0 }
end
if redis.call('HGET', K_meta, 'paused') == '1' then
  return { 1, 0 }
end
local n = pending_count()
if n > 0 then
  local room, tokens, rate = limit_room(1, redis.call('HMGET', K_meta, unpack(LIMIT_FIELDS)))
  if room > 0 then
    return { 0, n }
  end
  local at = limit_at(tokens, rate)
  if at ~= '' then
    return { 0, 0, at } -- pending, but the bucket holds claims back until at
  end
  -- At MaxInFlight: wait on the wake stream, which an ended lease writes.
  mark_waiting(wait_ms)
  return { 0, 0, '' }
end
mark_waiting(wait_ms)
return { 0, 0 }
