-- create.lua: makes every key of a queue exist, each with its sentinel
-- (see queue/layout.go), and answers 1 when the queue is new. Safe to run
-- any number of times: a key that exists is left as it is.
local new = 0
if redis.call('HSETNX', K_meta, 'created_ms', now) == 1 then
  new = 1
end
for _, k in ipairs({ K_jobs, K_data, K_idem, K_claims }) do
  redis.call('HSETNX', k, SENTINEL, '')
end
for _, k in ipairs({ K_sched, K_leases, K_dead, K_done, K_expiry }) do
  redis.call('ZADD', k, 'NX', 'inf', SENTINEL)
end
if redis.call('LLEN', K_pending) == 0 then
  redis.call('RPUSH', K_pending, SENTINEL)
end
if redis.call('XLEN', K_wake) == 0 then
  redis.call('XADD', K_wake, 'MAXLEN', '1', '*', 'n', 0)
end
return new
