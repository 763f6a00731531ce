-- cron_put.lua: writes a cron entry's settings, their new version and
-- their cursor, when the entry is still what the caller read: the digest
-- of its stored JSON (SHA-1 hex; "" when it was absent) is compared, so a
-- put of one entry never conflicts with a put of another (the caller
-- reads again only when this entry changed under it).
-- Keys and arguments: store.CronPut in internal/store/ops.go: name (the
-- entry's), digest (of the stored JSON the caller read; "" for none),
-- stored (the new stored JSON), cursor (Unix ms; "" when the entry has
-- none), max_entries (the most entries there may be; a new entry past it
-- is refused).
-- Returns: { "changed" } when the entry is not what the caller read;
--          { "full", n } when it is new and n entries are stored already,
--          n >= max_entries; { "created" } or { "replaced" } when written.
local max_entries = tonumber(A_max_entries)
if not max_entries or A_name == '' or (A_cursor ~= '' and not tonumber(A_cursor)) then
  return redis.error_reply('ERR cron_put.lua: bad arguments')
end
local cur = redis.call('HGET', K_entries, A_name)
local digest = ''
if cur then
  digest = redis.sha1hex(cur)
end
if digest ~= A_digest then
  return { 'changed' }
end
if not cur then
  local n = redis.call('HLEN', K_entries)
  if n >= max_entries then
    return { 'full', n }
  end
end
-- A version no other settings ever had: the scheduler's cursor moves are
-- fenced by it (see cron_advance.lua).
local version = redis.call('INCR', K_seq)
redis.call('HSET', K_entries, A_name, A_stored)
redis.call('HSET', K_versions, A_name, version)
if A_cursor == '' then
  redis.call('ZREM', K_due, A_name)
else
  redis.call('ZADD', K_due, A_cursor, A_name)
end
if cur then
  return { 'replaced' }
end
return { 'created' }
