-- wait.lua: the first half of a blocking peek: answers whether the queue
-- is paused and how many jobs are pending (and claimable under the queue's
-- limits), and when none is, marks that a
-- claimer is about to wait wait_ms on the wake stream and answers the
-- stream's last entry to wait after. Keys and arguments: specWait in
-- internal/store/layout.go. Pending counts the jobs a claimer with the label sets
-- eligible may take (see claim.lua); it waits on their wake streams and
-- the queue's own.
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
if redis.call('HGET', K_meta, M_paused) == '1' then
  return { 1, 0 }
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local n = pending_count()
if n > 0 then
  -- Of those, the ones this claimer may take (eligible: as claim.lua's).
  local mine = list_len(K_pending)
  for id in string.gmatch(A_eligible, '[^,]+') do
    if SETS.list[id] then
      mine = mine + list_len(SETS.list[id])
    end
  end
  -- and the flow keys whose turn may come (see "Flow keys" in common.lua)
  mine = mine + math.max(redis.call('ZCARD', K_fring) - 1, 0)
  n = math.min(n, mine)
  if n == 0 then
    local w = redis.call('ZRANGE', K_fwait, '0', '0', 'WITHSCORES')
    if w[1] and w[1] ~= SENTINEL then
      return { 0, 0, tostring(math.max(tonumber(w[2]), now)) } -- a key's rate holds its jobs until then
    end
  end
end
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
