-- note.lua: appends a line to a claimed job's notes (the dispatcher's log
-- of its attempts: status, duration, error), keeping the last keep lines,
-- while token is the job's current claim. Keys and arguments: specNote in
-- queue/layout.go.
-- Returns: 1, 0 when token is not the job's current claim (lease lost:
-- nothing written), -1 when there is no job.
-- Safe to run twice: a rerun finds its line last already and adds nothing.
local keep = tonumber(A_keep)
if not keep or keep < 1 then
  return redis.error_reply('ERR chronoq note: malformed arguments')
end
local f = load(A_id)
if not f then
  return -1
end
if f[R_token] ~= A_token or f[R_status] ~= 'processing' then
  return 0
end
local field = A_id .. '.n'
local lines = {}
local old = redis.call('HGET', K_data, field)
if old then
  for line in string.gmatch(old, '[^\n]+') do
    lines[#lines + 1] = line
  end
end
if lines[#lines] == A_entry then
  return 1
end
lines[#lines + 1] = A_entry
local first = math.max(1, #lines - keep + 1)
redis.call('HSET', K_data, field, table.concat(lines, '\n', first, #lines))
return 1
