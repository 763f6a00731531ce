-- wf_record.lua: records that nodes' jobs ended (a releaser read their
-- outbox entries), each once: a node's outcome and what its children
-- receive of it, and for each child one parent less to wait for (and one
-- more failed, unless completed). When it was the last node the workflow
-- has ended, and its hash expires retention_ms later. Keys and arguments:
-- store.WFRecord in internal/store/ops.go; per end: node, gen (the entry's: a
-- stale entry, of a gen before a retry, is recorded nowhere), outcome, up
-- (the node's upstream entry, JSON), brief (the same without its result
-- and artifacts). Every end is recorded before any child is planned, and
-- each distinct child is planned once: a child whose last parents end in
-- one call is released once, with all of them in its upstream.
-- The end recorded last when the workflow ended is its ender (WF_ended_by):
-- its code is 3, now and on a rerun, so that the ack of its outbox entry
-- writes the workflow.ended event (wfack.lua) however often it is
-- recorded.
-- Returns: { code_1, ..., code_n, ended, actions... }: code -1 no such
--          workflow or node, 2 a stale entry, 1 recorded (now or before),
--          3 the same and the end that ended the workflow; ended is ""
--          or, with a code 3, "<status>|<ended ms>"; then what the
--          children of the ends coded 1 or 3 need now (see wf_plan), also
--          on a rerun, whose first run's actions may not all have been
--          applied.
local retention, n = tonumber(A_retention_ms), tonumber(A_n)
if not retention or not n or n < 1 then
  return redis.error_reply('ERR chronoq wf_record: malformed arguments')
end
local gens = {}
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local gen, outcome = tonumber(ARGV[b + G_gen]), ARGV[b + G_outcome]
  if not gen or (outcome ~= 'completed' and outcome ~= 'dead' and outcome ~= 'canceled') then
    return redis.error_reply('ERR chronoq wf_record: malformed arguments')
  end
  gens[i + 1] = gen
end
-- One read for the batch: the workflow's id and node count, then each
-- end's gen and children (the loop below writes neither, so an end named
-- twice reads the same).
local fields = { WF_id, WF_n }
for i = 0, n - 1 do
  local node = ARGV[GROUP_START + i * GROUP + G_node]
  fields[3 + 2 * i], fields[4 + 2 * i] = NODE_gen .. node, NODE_children .. node
end
local m = redis.call('HMGET', K_wf, unpack(fields))
if not m[1] then
  local out = {}
  for i = 1, n do
    out[i] = -1
  end
  out[n + 1] = ''
  return out
end
local total = tonumber(m[2])
local out, names, planned, recorded, last = {}, {}, {}, 0, nil
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local node, outcome = ARGV[b + G_node], ARGV[b + G_outcome]
  local gen, children = m[3 + 2 * i], m[4 + 2 * i]
  if not gen then
    out[i + 1] = -1
  elseif tonumber(gen) ~= gens[i + 1] then
    out[i + 1] = 2
  else
    out[i + 1] = 1
    children = wf_split(children)
    -- HSETNX: an end recorded before, or earlier in this batch, is not
    -- counted again
    if redis.call('HSETNX', K_wf, NODE_outcome .. node, outcome) == 1 then
      redis.call('HSET', K_wf, NODE_up .. node, ARGV[b + G_up], NODE_brief .. node, ARGV[b + G_brief])
      recorded, last = recorded + 1, node
      for _, c in ipairs(children) do
        redis.call('HINCRBY', K_wf, NODE_left .. c, -1)
        if outcome ~= 'completed' then
          redis.call('HINCRBY', K_wf, NODE_failed .. c, 1)
        end
      end
    end
    for _, c in ipairs(children) do
      if not planned[c] then
        planned[c] = true
        names[#names + 1] = c
      end
    end
  end
end
-- The ends newly recorded, counted once: the workflow has ended when they
-- were its last.
if recorded > 0 and redis.call('HINCRBY', K_wf, WF_ended, recorded) >= total then
  wf_finish(retention, last)
end
local e = redis.call('HMGET', K_wf, WF_ended_at, WF_ended_by, WF_end_status)
out[n + 1] = ''
if e[1] and e[2] then
  for i = n, 1, -1 do -- the last end naming the ender: one code 3 a call
    if out[i] == 1 and ARGV[GROUP_START + (i - 1) * GROUP + G_node] == e[2] then
      out[i], out[n + 1] = 3, e[3] .. '|' .. e[1]
      break
    end
  end
end
wf_plan(names, out, false)
return out
