-- wf_start.lua: starts a workflow whose jobs all exist (waiting): from now
-- on its nodes are released. Keys: store.WFStart in internal/store/ops.go.
-- Returns: { code, actions... }: code -1 no such workflow, 0 canceled
--          before it started, 1 started (now or before); then what its
--          jobs need (see wf_plan): its roots' releases, or aborts.
if redis.call('HEXISTS', K_wf, WF_id) == 0 then
  return { -1 }
end
local out = { 1 }
if redis.call('HEXISTS', K_wf, WF_canceled) == 1 then
  out[1] = 0
else
  redis.call('HSET', K_wf, WF_started, '1')
end
wf_plan(wf_split(redis.call('HGET', K_wf, WF_names)), out, false)
return out
