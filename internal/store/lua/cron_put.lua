-- put.lua: writes a cron entry's settings, their new version and their
-- cursor, when the entry is still what the caller read: the digest of
-- its stored JSON (SHA-1 hex; "" when it was absent) is compared, so a
-- put of one entry never conflicts with a put of another (the caller
-- reads again only when this entry changed under it).
-- KEYS[1] -> <ns>:cron                  (HASH name -> stored JSON)
-- KEYS[2] -> <ns>:{<ns>:cron}:versions  (HASH name -> version)
-- KEYS[3] -> <ns>:{<ns>:cron}:due       (ZSET name -> cursor ms)
-- KEYS[4] -> <ns>:{<ns>:cron}:seq       (STRING the last version)
-- ARGV[1] -> the entry's name
-- ARGV[2] -> the digest of the stored JSON the caller read; "" for none
-- ARGV[3] -> the new stored JSON
-- ARGV[4] -> the cursor, Unix ms; "" when the entry has none
-- ARGV[5] -> the most entries there may be; a new entry past it is refused
-- Returns: { "changed" } when the entry is not what the caller read;
--          { "full", n } when it is new and n entries are stored already,
--          n >= ARGV[5]; { "created" } or { "replaced" } when written.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local digest = ''
if cur then
  digest = redis.sha1hex(cur)
end
if digest ~= ARGV[2] then
  return { 'changed' }
end
if not cur then
  local n = redis.call('HLEN', KEYS[1])
  if n >= tonumber(ARGV[5]) then
    return { 'full', n }
  end
end
-- A version no other settings ever had: the scheduler's cursor moves are
-- fenced by it (see advance.lua).
local version = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], version)
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
end
if cur then
  return { 'replaced' }
end
return { 'created' }
