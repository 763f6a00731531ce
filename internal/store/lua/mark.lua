-- mark.lua: lowers a queue's entries in two attention indexes (see
-- queue/attention.go) and publishes the nudge of a due mark. Keys and
-- arguments: store.Mark in internal/store/ops.go; index_a and seqs_a are
-- the due index and its seqs, index_b and seqs_b the sweep index (or the
-- outbox index) and its seqs; at_a and at_b are ms, 0 for none; seq is
-- the mark's (µs). Returns 1.
local q, seq = A_queue, tonumber(A_seq)
if A_at_a ~= '0' then
  redis.call('ZADD', K_index_a, 'LT', A_at_a, q)
  if tonumber(redis.call('HGET', K_seqs_a, q) or '0') < seq then
    redis.call('HSET', K_seqs_a, q, seq)
  end
end
if A_at_b ~= '0' then
  redis.call('ZADD', K_index_b, 'LT', A_at_b, q)
  if tonumber(redis.call('HGET', K_seqs_b, q) or '0') < seq then
    redis.call('HSET', K_seqs_b, q, seq)
  end
end
if A_at_a ~= '0' then
  redis.call('PUBLISH', A_channel, A_nudge)
end
return 1
