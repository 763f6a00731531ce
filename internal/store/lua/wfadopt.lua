-- wfadopt.lua: makes an existing job a watched parent of an implicit
-- workflow (a single job's depends_on, see package workflow): the
-- workflow's ref is added to the job's watchers (R_watchers, at most
-- max_watchers of them), so that its ends leave outbox entries for that
-- workflow too (wf_ended: one entry, every ref). The job's own workflow
-- (R_workflow, a node's) is left as it is: a node of a workflow may be
-- watched, and a job by many workflows. When the job has ended already,
-- its entry is written now: the ref is added to an entry not acked yet
-- (the rest of it kept as it is: that end's), or an entry of this ref
-- alone is written (an entry acked already was handled for the others).
-- Keys and arguments: store.WFAdopt in internal/store/ops.go; workflow is
-- "<workflow id>|<node>|<gen>".
-- Returns, through reply(): { code, status }: code 1 adopted, 2 adopted
--          and ended (its entry is written), 3 adopted before by this
--          workflow (a rerun: nothing changes), -2 the job has
--          max_watchers watchers already (status is that count), -1 no
--          such job.
local maxw = tonumber(A_max_watchers)
if not maxw or not string.match(A_workflow, '^[^|,]+|[^|,]+|%d+$') then
  return redis.error_reply('ERR chronoq wfadopt: malformed arguments')
end
local f = load(A_id)
if not f then
  return reply({ -1, '' })
end
local st = f[R_status]
local ended = st == 'completed' or st == 'dead' or st == 'canceled'
local n = 0
for w in string.gmatch(f[R_watchers], '[^,]+') do
  if w == A_workflow then
    if ended then
      wf_rerun() -- the first run's mark may be lost with its reply
    end
    return reply({ 3, st })
  end
  n = n + 1
end
-- a job adopted by a version before watchers holds the ref as its own
if f[R_workflow] == A_workflow then
  if ended then
    wf_rerun()
  end
  return reply({ 3, st })
end
if n >= maxw then
  return reply({ -2, tostring(n) })
end
f[R_watchers] = f[R_watchers] == '' and A_workflow or f[R_watchers] .. ',' .. A_workflow
save(A_id, f)
if ended then
  local e = redis.call('HGET', K_wfout, A_id)
  local cut = e and string.find(e, '\0', 1, true)
  if cut then
    redis.call('HSET', K_wfout, A_id, string.sub(e, 1, cut - 1) .. ',' .. A_workflow .. string.sub(e, cut))
  else
    local d = redis.call('HMGET', K_data, A_id .. '.r', A_id .. '.a')
    redis.call('HSET', K_wfout, A_id, A_workflow .. '\0' .. st .. '\0' .. (d[1] or '') .. '\0' .. (d[2] or '') ..
      '\0' .. f[R_last_error])
  end
  mark('wf', now)
  return reply({ 2, st })
end
return reply({ 1, st })
