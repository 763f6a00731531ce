-- wf_create.lua: writes a new workflow's graph (see common.lua's
-- workflow section): every node with its job, parents and children, no
-- outcome, at gen 0, not started. Keys and arguments: specWFCreate in
-- internal/store/layout.go; per node: name, job ("<queue>|<id>"), parents,
-- children (comma-joined names), external ("1": a job that existed before,
-- adopted by wfadopt.lua; nothing but its ends is ever asked of it). The graph was validated by the caller
-- (package workflow): acyclic, names unique and known.
-- Returns: 1 created, 2 it existed (a rerun).
local n, upmax = tonumber(A_n), tonumber(A_upstream_max)
if not n or not upmax or A_id == '' or (A_policy ~= 'cancel' and A_policy ~= 'continue') then
  return redis.error_reply('ERR chronoq wf_create: malformed arguments')
end
if redis.call('HEXISTS', K_wf, WF_id) == 1 then
  return 2
end
local names, fields = {}, {}
local function flush()
  if #fields > 0 then
    redis.call('HSET', K_wf, unpack(fields))
    fields = {}
  end
end
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local name, parents = ARGV[b + G_name], ARGV[b + G_parents]
  names[#names + 1] = name
  local left = #wf_split(parents)
  for _, kv in ipairs({ { NODE_job, ARGV[b + G_job] }, { NODE_parents, parents }, { NODE_children, ARGV[b + G_children] },
    { NODE_left, left }, { NODE_failed, 0 }, { NODE_gen, 0 }, { NODE_external, ARGV[b + G_external] } }) do
    fields[#fields + 1] = kv[1] .. name
    fields[#fields + 1] = kv[2]
  end
  if #fields >= 3000 then
    flush()
  end
end
flush()
redis.call('HSET', K_wf, WF_names, table.concat(names, ','), WF_policy, A_policy, WF_gen, 0, WF_n, n, WF_ended, 0, WF_upmax, upmax,
  WF_created, now_str, WF_id, A_id)
return 1
