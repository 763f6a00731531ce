-- park.lua: sets a queue's entry in one attention index to a pass's
-- finding (0: out of the index) unless a later write was applied. Keys
-- and arguments: store.Park in internal/store/ops.go. Returns 1 when set.
local q, seq = A_queue, tonumber(A_seq)
if tonumber(redis.call('HGET', K_seqs, q) or '0') >= seq then
  return 0
end
redis.call('HSET', K_seqs, q, seq)
if A_at == '0' then
  redis.call('ZREM', K_index, q)
else
  redis.call('ZADD', K_index, A_at, q)
end
return 1
