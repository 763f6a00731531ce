-- register.lua: adds a name to a namespace's set of queue names (its one
-- key, global: not a queue's) unless that would pass the cap, in one step
-- so that concurrent first enqueues cannot pass it together. Keys and
-- arguments: store.Register in internal/store/ops.go. Returns 1 when the
-- name is in the set, 0 when the cap refused it.
if redis.call('SISMEMBER', K_queues, A_name) == 1 then
  return 1
end
if redis.call('SCARD', K_queues) >= tonumber(A_max) then
  return 0
end
redis.call('SADD', K_queues, A_name)
return 1
