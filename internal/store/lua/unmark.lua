-- unmark.lua: takes a deleted queue out of both attention indexes. Keys
-- and arguments: store.Unmark in internal/store/ops.go. Returns 1.
redis.call('ZREM', K_due, A_queue)
redis.call('HDEL', K_due_seq, A_queue)
redis.call('ZREM', K_sweep, A_queue)
redis.call('HDEL', K_sweep_seq, A_queue)
return 1
