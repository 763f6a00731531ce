-- wf_plan.lua: answers what every node's job needs now (see wf_plan in
-- common.lua), rearms included: a releaser finishing a creation, cancel
-- or retry whose process died part-way. Writes nothing. Keys:
-- store.WFPlan in internal/store/ops.go.
-- Returns: { code, actions... }: code -1 no such workflow, 1 otherwise.
if redis.call('HEXISTS', K_wf, WF_id) == 0 then
  return { -1 }
end
local out = { 1 }
wf_plan(wf_split(redis.call('HGET', K_wf, WF_names)), out, true)
return out
