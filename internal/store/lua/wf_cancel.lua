-- wf_cancel.lua: cancels a workflow: from now on every node without an
-- outcome is aborted (see wfnode.lua). Keys and arguments: specWFCancel
-- in internal/store/layout.go.
-- Returns: { code, actions... }: code -1 no such workflow, 1 canceled
--          (now or before), 0 it had ended; then the aborts.
if not tonumber(A_retention_ms) then
  return redis.error_reply('ERR chronoq wf_cancel: malformed arguments')
end
local m = redis.call('HMGET', K_wf, WF_id, WF_ended_at)
if not m[1] then
  return { -1 }
end
if m[2] then
  return { 0 }
end
redis.call('HSETNX', K_wf, WF_canceled, now)
local out = { 1 }
wf_plan(wf_split(redis.call('HGET', K_wf, WF_names)), out, false)
return out
