-- settings.lua: writes a queue's settings, fields of its meta hash (see
-- Settings in internal/store/layout.go); a value "" deletes its field. Keys and
-- arguments: store.Settings in internal/store/ops.go.
-- Returns: 1, or -1 when the queue does not exist (nothing is written: a
-- meta hash made by a write here would be a queue without its other keys).
-- Safe to run twice: it sets values.
if not exists() then
  return -1
end
for i = GROUP_START, #ARGV, GROUP do
  local field, value = ARGV[i + G_field], ARGV[i + G_value]
  if value == '' then
    redis.call('HDEL', K_meta, field) -- never empties meta: created_ms stays
  else
    redis.call('HSET', K_meta, field, value)
  end
end
return 1
