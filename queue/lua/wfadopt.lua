-- wfadopt.lua: makes a job that exists already a node of a workflow (a
-- single job's depends_on, see package workflow): its ends leave outbox
-- entries from now on, and when it has ended already, its entry is
-- written now. Keys and arguments: specWFAdopt in queue/layout.go;
-- workflow is "<workflow id>|<node>|<gen>".
-- Returns, through reply(): { code, status }: code 1 adopted, 2 adopted
--          and ended (its entry is written), 3 adopted before by this
--          workflow (a rerun), 0 it is a node of another workflow (status
--          is that workflow's id), -1 no such job.
if not string.match(A_workflow, '^[^|]+|[^|]+|%d+$') then
  return redis.error_reply('ERR chronoq wfadopt: malformed arguments')
end
local f = load(A_id)
if not f then
  return reply({ -1, '' })
end
if f[R_workflow] == A_workflow then
  return reply({ 3, f[R_status] })
end
if f[R_workflow] ~= '' then
  return reply({ 0, string.match(f[R_workflow], '^([^|]*)') })
end
f[R_workflow] = A_workflow
save(A_id, f)
local st = f[R_status]
if st == 'completed' or st == 'dead' or st == 'canceled' then
  wf_ended(A_id, f, st)
  return reply({ 2, st })
end
return reply({ 1, st })
