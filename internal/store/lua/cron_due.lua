-- cron_due.lua: reads, at one instant of Redis's clock, the cron entries
-- whose cursor has come, each with the version of its settings and the
-- settings themselves, and what the loop needs to sleep and to check the
-- index.
-- Keys and arguments: store.CronDue in internal/store/ops.go: offset_us
-- (µs added to Redis's TIME: 0, except under a test's fake clock), limit
-- (at most this many due entries).
-- Returns: { now (Unix µs, Redis's TIME plus offset_us), the first cursor
--            after now ("" when none), the number of entries, the number
--            of versions, then for each due entry, by cursor: name,
--            cursor, version, JSON ("" when absent) }
-- A cursor is due when Redis's clock has reached it: the instance's clock
-- decides nothing. Read only. Its cost grows with the due entries it
-- answers, and with the logarithm of the index: never with the number of
-- entries.
local offset, limit = tonumber(A_offset_us), tonumber(A_limit)
if not offset or not limit then
  return redis.error_reply('ERR cron_due.lua: bad arguments')
end
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + offset
local now = string.format('%d', math.floor(now_us / 1000))
local due = redis.call('ZRANGEBYSCORE', K_due, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local after = redis.call('ZRANGEBYSCORE', K_due, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local out = { now_us, after[2] or '', redis.call('HLEN', K_entries), redis.call('HLEN', K_versions) }
for i = 1, #due, 2 do
  local name = due[i]
  out[#out + 1] = name
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HGET', K_versions, name) or ''
  out[#out + 1] = redis.call('HGET', K_entries, name) or ''
end
return out
