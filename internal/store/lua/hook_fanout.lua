-- hook_fanout.lua: adds a queue's outbox entries to one subscription's
-- pending deliveries, in the order given, each once: the subscription's
-- cursor for the queue (cur) holds the last entry added, and an entry at
-- or before it is skipped, so two dispatchers that read the same entries
-- add them once, and a rerun adds nothing.
-- Keys and arguments: store.HookFanout in internal/store/ops.go: id (the
-- subscription), queue, max_pending (the cap of pending deliveries), then
-- per entry its outbox id ("<ms>-<seq>", ascending), job ("<queue>|<id>")
-- and body.
-- Returns: { added, dropped } (dropped: past max_pending), or { -1, 0 }
-- when the subscription is gone.
if redis.call('HEXISTS', K_subs, A_id) == 0 then
  return { -1, 0 }
end
local function after(a, b) -- outbox id a comes after b
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end
local cur = redis.call('HGET', K_cur, A_queue) or '0-0'
local pending = redis.call('ZCARD', K_pend)
local max = tonumber(A_max_pending)
local added, dropped, last = 0, 0, nil
for i = GROUP_START, #ARGV, GROUP do
  local sid, job, body = ARGV[i + G_sid], ARGV[i + G_job], ARGV[i + G_body]
  if after(sid, cur) then
    last, cur = sid, sid
    if pending >= max then
      dropped = dropped + 1
    else
      local ek = A_queue .. '|' .. sid
      redis.call('HSET', K_ev, ek, '0|0|' .. job .. '|' .. body)
      redis.call('ZADD', K_pend, redis.call('INCR', K_seq), ek)
      pending, added = pending + 1, added + 1
    end
  end
end
if last then
  redis.call('HSET', K_cur, A_queue, last)
end
return { added, dropped }
