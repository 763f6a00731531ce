-- enqueue.lua: adds jobs to one queue, each due now (pending) or later
-- (scheduled), honouring idempotency keys. The queue must exist (create.lua). Keys and arguments: store.Enqueue in internal/store/ops.go; per
-- job: id, kind, payload (kept in the record when small, see inline), spec, when ("d<µs>" a delay after Redis's now,
-- "a<score>" an absolute due score), idempotency key ("" none),
-- result_ttl_ms ("" default), labels (canonical, "" none), trace (the
-- enqueue's W3C traceparent, "" none: see internal/tracing). The keys of
-- the label sets of its jobs follow its declared keys (see layout.go):
-- a set not registered yet is registered (its list and wake stream made,
-- with their sentinels, and its id appended to meta's lsets), unless the
-- queue would then have more than max_sets.
-- Returns: { -1 } when the queue does not exist; { -2, labels } when a
--          new label set would pass max_sets (nothing written); else, through reply()
--          (a job that became the queue's earliest scheduled one is its
--          due mark), { now_us, id_1, replayed_1, due_1, ..., id_n,
--          replayed_n, due_n }: id_i the job that answers job
--          i (its own id, or the job of its idempotency key); replayed_i 1
--          when that is another, earlier job, 2 when job i itself existed
--          already (a rerun of this call; it may have run since, and even
--          been deleted: it is not made again); due_i its due score.
local n, idem_ttl, max_sets = tonumber(A_n), tonumber(A_idem_ttl_ms), tonumber(A_max_sets)
if not n or not idem_ttl or not max_sets then
  return redis.error_reply('ERR chronoq enqueue: malformed arguments')
end
-- Parse and check everything before the first write.
sets_bind()
local jobs, labels_of = {}, {} -- labels_of: set id -> its labels
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local j = { id = ARGV[b + G_id], kind = ARGV[b + G_kind], payload = ARGV[b + G_payload],
    spec = ARGV[b + G_spec], idem = ARGV[b + G_idem], rttl = ARGV[b + G_result_ttl_ms], labels = ARGV[b + G_labels],
    trace = ARGV[b + G_trace] }
  j.score = due_of(ARGV[b + G_when])
  if not j.score or not spec_max_attempts(j.spec) then
    return redis.error_reply('ERR chronoq enqueue: malformed job ' .. i)
  end
  job_labels(labels_of, j.labels)
  jobs[#jobs + 1] = j
end

local meta = redis.call('HMGET', K_meta, M_created_ms, M_waiting_until, M_active_ms, M_lsets)
if not meta[1] then
  return { -1 } -- deleted since this client created it: the client creates it again
end
-- The label sets that are new, within the cap.
local over = add_sets(labels_of, max_sets, meta[4])
if over then
  return over
end

local out = { now_us }
local rerun = false
-- Which jobs exist already (written by an earlier run of this same call,
-- or their tombstones), in one HMGET: those are not made again.
local ids = {}
for i, j in ipairs(jobs) do
  ids[i] = j.id
end
local there = redis.call('HMGET', K_jobs, unpack(ids))
local made = {} -- ids made by this run: an id given twice is made once
local added, sched, data, recs = 0, {}, {}, {}
local cut = tonumber(cutoff)
for i, j in ipairs(jobs) do
  local answer, replayed = j.id, 0
  if j.idem ~= '' then
    local first, till = idem_of(j.idem)
    if first and till > now and (made[first] or redis.call('HEXISTS', K_jobs, first) == 1) then
      if first == j.id then
        replayed = 2 -- written by an earlier run of this same call
        rerun = true
      else
        answer, replayed = first, 1
      end
    end
  end
  if replayed == 0 and (there[i] or made[j.id]) then
    replayed = 2 -- a job already there: this same call's earlier run
    rerun = true
  end
  if replayed == 0 then
    made[j.id] = true
    local due = tonumber(j.score)
    local status, run = 'pending', '' -- due already: it runs from now
    if due > cut then
      status, run = 'scheduled', '+' .. int_str(math.floor(due) - now) -- after enqueued_at (see encode)
    end
    -- A small payload goes into the record, a larger one into the data
    -- hash (see recInline in internal/store/layout.go).
    local p = inline(j.payload) and j.payload or nil
    recs[#recs + 1] = j.id
    recs[#recs + 1] = fresh_rec(STATUS_CODE[status], j.kind, j.spec, run, j.idem, j.rttl, j.labels, j.trace, p)
    if status == 'pending' then
      to_pending(j.id, j.labels)
    else
      sched[#sched + 1] = j.score
      sched[#sched + 1] = j.id
      note_due(due)
    end
    if not p then
      data[#data + 1] = j.id
      data[#data + 1] = j.payload
    end
    if j.idem ~= '' then
      redis.call('HSET', K_idem, j.idem, j.id .. '|' .. int_str(now + idem_ttl))
    end
    added = added + 1
    emit('enqueued', j.id, j.kind, status, '0')
    -- a cron tick's job (its idempotency key "cron:<entry>:<tick ms>"):
    -- the tick fired, an event for the hooks
    if j.idem ~= '' then
      local cron = string.sub(j.idem, 1, #CRON_IDEM) == CRON_IDEM and string.match(j.idem, '^.-:(.*):%d+$')
      if cron then
        hook('cron_fired', j.id, { [R_kind] = j.kind, [R_attempts] = '0', [R_last_error] = '' }, status, cron)
      end
    end
  end
  out[#out + 1] = answer
  out[#out + 1] = replayed
  out[#out + 1] = j.score
end
if #recs > 0 then
  redis.call('HSET', K_jobs, unpack(recs))
end
if #data > 0 then
  redis.call('HSET', K_data, unpack(data))
end
flush_pending(false, true, meta[2] or '0')
if #sched > 0 then
  redis.call('ZADD', K_sched, unpack(sched))
end
count(M_enqueued, added)
if tonumber(meta[3] or '0') < now - 60000 then
  redis.call('HSET', K_meta, M_active_ms, now) -- the last enqueue, to the minute: idle queues are forgotten by it
end
publish_events()
if rerun then
  return rerun_reply(out, K_sched, {})
end
return reply(out)
