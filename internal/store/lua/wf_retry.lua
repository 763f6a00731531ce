-- wf_retry.lua: retries a workflow: every node that ended dead or
-- canceled (but an external one, see wf_plan) has its outcome forgotten and is armed again at a new gen
-- (its old outbox entries are then stale), its children and it wait again
-- for what has not completed, and a cancel of the whole workflow is
-- lifted. Keys: store.WFRetry in internal/store/ops.go.
-- Returns: { code, actions... }: code -1 no such workflow, 0 nothing to
--          retry, 1 retried; then what every node's job needs now (see
--          wf_plan): the rearms, then the releases of those ready.
local m = redis.call('HMGET', K_wf, WF_id, WF_names, WF_canceled)
if not m[1] then
  return { -1 }
end
local names = wf_split(m[2])
local again = {}
for _, x in ipairs(names) do
  local o = redis.call('HGET', K_wf, NODE_outcome .. x)
  if (o == 'dead' or o == 'canceled') and redis.call('HGET', K_wf, NODE_external .. x) ~= '1' then
    again[#again + 1] = x
  end
end
if #again == 0 and not m[3] then
  return { 0 }
end
redis.call('HDEL', K_wf, WF_canceled, WF_ended_at, WF_ended_by, WF_end_status)
redis.call('PERSIST', K_wf)
local gen = redis.call('HINCRBY', K_wf, WF_gen, 1)
local touched = {}
for _, x in ipairs(again) do
  redis.call('HDEL', K_wf, NODE_outcome .. x, NODE_up .. x)
  redis.call('HSET', K_wf, NODE_gen .. x, gen)
  redis.call('HINCRBY', K_wf, WF_ended, -1)
  touched[x] = true
  for _, c in ipairs(wf_split(redis.call('HGET', K_wf, NODE_children .. x))) do
    touched[c] = true
  end
end
for x in pairs(touched) do
  local left, failed = 0, 0
  for _, p in ipairs(wf_split(redis.call('HGET', K_wf, NODE_parents .. x))) do
    local o = redis.call('HGET', K_wf, NODE_outcome .. p)
    if not o then
      left = left + 1
    elseif o ~= 'completed' then
      failed = failed + 1
    end
  end
  redis.call('HSET', K_wf, NODE_left .. x, left, NODE_failed .. x, failed)
end
local out = { 1 }
wf_plan(names, out, true)
return out
