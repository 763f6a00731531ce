-- hook_put.lua: creates or replaces a subscription.
-- Keys and arguments: store.HookPut in internal/store/ops.go: id, value
-- (its JSON), mode ("create": a new id, within max; "update": an existing
-- one), max.
-- Returns: 1, 0 (update: no such subscription; create: the id exists) or
-- -1 (create: max subscriptions exist).
local exists = redis.call('HEXISTS', K_subs, A_id) == 1
if A_mode == 'update' then
  if not exists then
    return 0
  end
elseif exists then
  return 0
elseif redis.call('HLEN', K_subs) >= tonumber(A_max) then
  return -1
end
redis.call('HSET', K_subs, A_id, A_value)
return 1
