-- wf_record.lua: records that a node's job ended (a releaser read its
-- outbox entry), once: the node's outcome and what its children receive
-- of it, and for each child one parent less to wait for (and one more
-- failed, unless completed). When it was the last node the workflow has
-- ended, and its hash expires retention_ms later. Keys and arguments:
-- specWFRecord in queue/layout.go; gen is the entry's (a stale entry, of
-- a gen before a retry, is recorded nowhere); up the node's upstream
-- entry (JSON), brief the same without its result and artifacts.
-- Returns: { code, actions... }: code -1 no such workflow or node, 2 a
--          stale entry, 1 recorded (now or before); then what the
--          children's jobs need now (see wf_plan), also on a rerun, whose
--          first run's actions may not all have been applied.
local retention, gen = tonumber(A_retention_ms), tonumber(A_gen)
if not retention or not gen or (A_outcome ~= 'completed' and A_outcome ~= 'dead' and A_outcome ~= 'canceled') then
  return redis.error_reply('ERR chronoq wf_record: malformed arguments')
end
local node = A_node
local m = redis.call('HMGET', K_wf, WF_id, WF_n, NODE_gen .. node, NODE_children .. node)
if not m[1] or not m[3] then
  return { -1 }
end
if tonumber(m[3]) ~= gen then
  return { 2 }
end
local children = wf_split(m[4])
if redis.call('HSETNX', K_wf, NODE_outcome .. node, A_outcome) == 1 then
  redis.call('HSET', K_wf, NODE_up .. node, A_up, NODE_brief .. node, A_brief)
  local ended = redis.call('HINCRBY', K_wf, WF_ended, 1)
  for _, c in ipairs(children) do
    redis.call('HINCRBY', K_wf, NODE_left .. c, -1)
    if A_outcome ~= 'completed' then
      redis.call('HINCRBY', K_wf, NODE_failed .. c, 1)
    end
  end
  if ended >= tonumber(m[2]) then
    wf_finish(retention)
  end
end
local out = { 1 }
wf_plan(children, out, false)
return out
