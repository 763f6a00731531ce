-- note.lua: appends a line to each of a batch of claimed jobs' notes (the
-- dispatcher's log of its attempts: status, duration, error), keeping the
-- last keep lines, for each job whose current claim is its token. Keys
-- and arguments: store.Note in internal/store/ops.go.
-- Returns: a code per item: 1, 0 when token is not the job's current claim
-- (lease lost: nothing written), -1 when there is no job.
-- Safe to run twice: a rerun finds each line last already and adds nothing.
local keep = tonumber(A_keep)
if not keep or keep < 1 then
  return redis.error_reply('ERR chronoq note: malformed arguments')
end
local out = {}
for i = GROUP_START, #ARGV, GROUP do
  local id, token, entry = ARGV[i + G_id], ARGV[i + G_token], ARGV[i + G_entry]
  local f = load(id)
  if not f then
    out[#out + 1] = -1
  elseif f[R_token] ~= token or f[R_status] ~= 'processing' then
    out[#out + 1] = 0
  else
    local field = id .. '.n'
    local lines = {}
    local old = redis.call('HGET', K_data, field)
    if old then
      for line in string.gmatch(old, '[^\n]+') do
        lines[#lines + 1] = line
      end
    end
    if lines[#lines] ~= entry then
      lines[#lines + 1] = entry
      local first = math.max(1, #lines - keep + 1)
      redis.call('HSET', K_data, field, table.concat(lines, '\n', first, #lines))
    end
    out[#out + 1] = 1
  end
end
return out
