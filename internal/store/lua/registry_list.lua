-- registry_list.lua: answers a page of the live workers, by id, and how
-- many are live. Keys and arguments: store.RegistryList in
-- internal/store/ops.go: from (where the page starts, as ZRANGEBYLEX takes
-- it: '-', '(' and the last id of the page before, or '[' and an id),
-- limit (0: only the count). Answers {now ms, live, next cursor (empty at
-- the end), then six values a worker: id, info, state, queues, held,
-- expiry ms}; an absent value is false.
local offset, from, limit, sweep_n = tonumber(A_offset_us), A_from, tonumber(A_limit), tonumber(A_sweep)
local f = string.sub(from, 1, 1)
if not offset or not limit or limit < 0 or not sweep_n or not (from == '-' or f == '(' or f == '[') then
  return redis.error_reply('ERR registry: bad arguments to list')
end
local now = clock(offset)
sweep(now, sweep_n)
local out = {now, live(now), ''}
if limit == 0 then
  return out
end
if from == '-' then
  from = '(' .. SENTINEL -- the sentinel sorts before every id
end
local ids = redis.call('ZRANGEBYLEX', K_ids, from, '+', 'LIMIT', 0, limit + 1)
if #ids > limit then
  out[3] = ids[limit]
end
for i = 1, math.min(#ids, limit) do
  local id = ids[i]
  local exp = redis.call('ZSCORE', K_expiry, id)
  if exp and tonumber(exp) > now then
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', K_info, id)
    out[#out + 1] = redis.call('HGET', K_state, id)
    out[#out + 1] = redis.call('HGET', K_queues, id)
    out[#out + 1] = redis.call('HGET', K_held, id)
    out[#out + 1] = exp
  end
end
return out
