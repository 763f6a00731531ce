-- due.lua: reads, at one instant, the entries whose cursor has come, each
-- with the version of its settings and the settings themselves, and what
-- the loop needs to sleep and to check the index.
-- KEYS[1] -> <ns>:cron                 (HASH name -> entry JSON)
-- KEYS[2] -> <ns>:{<ns>:cron}:versions (HASH name -> version)
-- KEYS[3] -> <ns>:{<ns>:cron}:due      (ZSET name -> cursor ms)
-- ARGV[1] -> now, Unix ms: cursors at or before it are due
-- ARGV[2] -> at most this many due entries
-- Returns: { the first cursor after now ("" when none), the number of
--            entries, the number of versions, then for each due entry, by
--            cursor: name, cursor, version, JSON ("" when absent) }
-- Read only. Its cost grows with the due entries it answers, and with
-- the logarithm of the index: never with the number of entries.
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local after = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local out = { after[2] or '', redis.call('HLEN', KEYS[1]), redis.call('HLEN', KEYS[2]) }
for i = 1, #due, 2 do
  local name = due[i]
  out[#out + 1] = name
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], name) or ''
  out[#out + 1] = redis.call('HGET', KEYS[1], name) or ''
end
return out
