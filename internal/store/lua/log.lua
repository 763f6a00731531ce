-- log.lua: appends lines to the log of a claimed job whose token is
-- current. Each line is field '<id>.l.<seq>' of K_data, "<at ms>|<line>",
-- seq from 1; the record's log field counts them ("<lines>|<bytes>|
-- <truncated>|<batch>|<added>"). Once the log holds max_lines lines or
-- max_bytes bytes of lines, the lines that do not fit are dropped and the
-- log is marked truncated. Keys and arguments: specLog in
-- internal/store/layout.go.
-- Returns: { code, added, last_seq, truncated }: code 1 appended (added
--          of the lines, 0 when the log is full), 0 lease lost (nothing
--          changed), -1 no such job.
-- Safe to run twice: a rerun of the last append (the same batch id)
-- answers what it did and adds nothing.
local max_lines, max_bytes = tonumber(A_max_lines), tonumber(A_max_bytes)
if not max_lines or not max_bytes or A_batch == '' then
  return redis.error_reply('ERR chronoq log: malformed arguments')
end
local f = load(A_id)
if not f then
  return { -1, 0, 0, 0 }
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return { 0, 0, 0, 0 }
end
local lines, bytes, trunc, batch, last = string.match(f[R_log], '^(%d+)|(%d+)|(%d)|([^|]*)|(%d+)$')
lines, bytes, trunc = tonumber(lines or '0'), tonumber(bytes or '0'), tonumber(trunc or '0')
if batch == A_batch then
  return { 1, tonumber(last), lines, trunc }
end
local was_trunc, fields, added = trunc, {}, 0
for i = GROUP_START, #ARGV, GROUP do
  local line = ARGV[i + G_line]
  if lines >= max_lines or bytes + #line > max_bytes then
    trunc = 1
    break
  end
  lines, bytes, added = lines + 1, bytes + #line, added + 1
  fields[#fields + 1] = A_id .. '.l.' .. lines
  fields[#fields + 1] = now_str .. '|' .. line
end
if added > 0 then
  redis.call('HSET', K_data, unpack(fields))
end
f[R_log] = lines .. '|' .. bytes .. '|' .. trunc .. '|' .. A_batch .. '|' .. added
save(A_id, f)
-- a "log" event when lines were added, or when the log was just marked
-- truncated (an append none of whose lines fit): a job's stream reads it
if added > 0 or trunc ~= was_trunc then
  emit('log', A_id, f[R_kind], f[R_status], f[R_attempts])
  publish_events()
end
return { 1, added, lines, trunc }
