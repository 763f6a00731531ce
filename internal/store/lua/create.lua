-- create.lua: makes every key of a queue exist, each with its sentinel
-- (see internal/store/layout.go), and answers 1 when the queue is new. Safe to run
-- any number of times: a key that exists is left as it is. Argument hooks
-- ("1") sets the queue's hooks setting; "0" leaves it as it is.
local hooks = A_hooks == '1'
local new = 0
if redis.call('HSETNX', K_meta, M_created_ms, now) == 1 then
  new = 1
end
redis.call('HSETNX', K_jobs, SENTINEL, '')
redis.call('HSETNX', K_data, SENTINEL, '')
redis.call('HSETNX', K_idem, SENTINEL, '')
redis.call('HSETNX', K_claims, SENTINEL, '')
redis.call('HSETNX', K_lsets, SENTINEL, '') -- label sets (see internal/store/layout.go): their own keys are made when a job first requires each
redis.call('HSETNX', K_wfout, SENTINEL, '')
redis.call('ZADD', K_sched, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_leases, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_dead, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_done, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_expiry, 'NX', 'inf', SENTINEL)
-- flow control (a queue made before it gets its keys here too)
redis.call('ZADD', K_fpend, 'NX', 0, SENTINEL) -- score 0, as its members: before every "<key>\0<id>"
redis.call('ZADD', K_frun, 'NX', 0, SENTINEL)
redis.call('ZADD', K_fring, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_fwait, 'NX', 'inf', SENTINEL)
redis.call('ZADD', K_fcount, 'NX', 'inf', SENTINEL)
redis.call('HSETNX', K_flow, SENTINEL, '')
redis.call('HSETNX', K_fover, SENTINEL, '')
if redis.call('LLEN', K_pending) == 0 then
  redis.call('RPUSH', K_pending, SENTINEL)
end
if redis.call('XLEN', K_wake) == 0 then
  redis.call('XADD', K_wake, 'MAXLEN', '1', '*', 'n', 0)
end
redis.pcall('XGROUP', 'CREATE', K_wake, WAKE_GROUP, '$') -- an error when it exists: kept as it is
if hooks then
  redis.call('HSET', K_meta, M_hooks, '1') -- a subscription takes every queue's events (see HooksAllKey)
end
if redis.call('EXISTS', K_hookout) == 0 then
  redis.call('XADD', K_hookout, HOOK_SENTINEL, 'n', SENTINEL) -- the hooks outbox's sentinel: its first entry
end
return new
