-- wfadd.lua: adds the jobs of a workflow's nodes to one queue, each
-- "waiting": in no list, claimable by no one, until a releaser releases
-- it (wfnode.lua) when its parents have ended. The queue must exist
-- (create.lua). Keys and arguments: store.WFAdd in internal/store/ops.go; per job:
-- id, kind, payload, spec, when (as enqueue.lua's: the job is released
-- then at the earliest), result_ttl_ms ("" default), workflow
-- ("<workflow id>|<node>|<gen>"), labels (canonical, "" none), trace
-- (the enqueue's W3C traceparent, "" none), flow (the job's flow key,
-- "" none; the release makes it count for its key). The keys
-- of the jobs' label sets follow the declared ones, as for enqueue.lua:
-- those the queue has not seen are registered here, so that the release
-- (wfnode.lua) finds its job's pending list.
-- Returns: { -1 } when the queue does not exist; { -2, labels } when a
--          new label set would pass max_sets (nothing written); else
--          { now_us, added }.
-- Safe to run twice: a job already there (HSETNX) is not written again.
local n, max_sets = tonumber(A_n), tonumber(A_max_sets)
if not n or not max_sets then
  return redis.error_reply('ERR chronoq wfadd: malformed arguments')
end
sets_bind()
local jobs, labels_of = {}, {} -- labels_of: set id -> its labels
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local j = { id = ARGV[b + G_id], kind = ARGV[b + G_kind], payload = ARGV[b + G_payload],
    spec = ARGV[b + G_spec], rttl = ARGV[b + G_result_ttl_ms], wf = ARGV[b + G_workflow], labels = ARGV[b + G_labels],
    trace = ARGV[b + G_trace], flow = ARGV[b + G_flow] }
  j.score = due_of(ARGV[b + G_when])
  if not j.score or not spec_max_attempts(j.spec) or not string.match(j.wf, '^[^|]+|[^|]+|%d+$') then
    return redis.error_reply('ERR chronoq wfadd: malformed job ' .. i)
  end
  job_labels(labels_of, j.labels)
  jobs[#jobs + 1] = j
end
local meta = redis.call('HMGET', K_meta, M_created_ms, M_active_ms, M_lsets)
if not meta[1] then
  return { -1 }
end
local over = add_sets(labels_of, max_sets, meta[3])
if over then
  return over
end
local added, data = 0, {}
for _, j in ipairs(jobs) do
  local f = new_record()
  f[R_status] = 'waiting'
  f[R_kind], f[R_spec], f[R_enqueued_at_ms] = j.kind, j.spec, now_str
  f[R_attempts], f[R_fence] = '0', '0'
  f[R_result_ttl_ms] = j.rttl
  f[R_run_at_ms] = int_str(math.max(math.floor(tonumber(j.score)), now))
  f[R_workflow] = j.wf
  f[R_labels] = j.labels
  f[R_trace] = j.trace
  f[R_flow] = j.flow
  if inline(j.payload) then -- as enqueue.lua: a small payload in the record
    f.p = j.payload
  end
  if redis.call('HSETNX', K_jobs, j.id, (encode(f))) == 1 then
    if not f.p then
      data[#data + 1] = j.id
      data[#data + 1] = j.payload
    end
    added = added + 1
    emit('enqueued', j.id, j.kind, 'waiting', '0')
  end
end
if #data > 0 then
  redis.call('HSET', K_data, unpack(data))
end
count(M_enqueued, added)
if tonumber(meta[2] or '0') < now - 60000 then
  redis.call('HSET', K_meta, M_active_ms, now)
end
publish_events()
return { now_us, added }
