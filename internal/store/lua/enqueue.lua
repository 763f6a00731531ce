-- enqueue.lua: adds jobs to one queue, each due now (pending) or later
-- (scheduled), honouring idempotency keys. The queue must exist (create.lua). Keys and arguments: store.Enqueue in internal/store/ops.go; per
-- job: id, kind, payload (kept in the record when small, see inline), spec, when ("d<µs>" a delay after Redis's now,
-- "a<score>" an absolute due score), idempotency key ("" none),
-- result_ttl_ms ("" default), labels (canonical, "" none), trace (the
-- enqueue's W3C traceparent, "" none: see internal/tracing), flow (its
-- flow key, "" none), debounce ("<period ms>|<max wait ms>": see below;
-- "" none). The keys of
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
--          been deleted: it is not made again), 3 when it was folded
--          into its flow key's waiting debounced job (that job's payload
--          became job i's, its due time moved to period after now, never
--          past max wait after the first; the answer is that job), 4 when
--          job i was made and canceled at once by its key's strategy
--          cancel_newest; due_i its due score.
-- Flow strategies (see queue.FlowStrategy) act on a job due at enqueue
-- whose key has its MaxInFlight of jobs processing and pending already:
-- cancel_newest cancels it, cancel_in_progress asks the key's oldest
-- processing job (not asked yet) to cancel.
local n, idem_ttl, max_sets = tonumber(A_n), tonumber(A_idem_ttl_ms), tonumber(A_max_sets)
if not n or not idem_ttl or not max_sets or not tonumber(A_retention_ms) or not tonumber(A_tomb_ms) then
  return redis.error_reply('ERR chronoq enqueue: malformed arguments')
end
-- Parse and check everything before the first write.
sets_bind()
local jobs, labels_of, specs_ok = {}, {}, {} -- labels_of: set id -> its labels; specs_ok: spec -> valid
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local j = { id = ARGV[b + G_id], kind = ARGV[b + G_kind], payload = ARGV[b + G_payload],
    spec = ARGV[b + G_spec], idem = ARGV[b + G_idem], rttl = ARGV[b + G_result_ttl_ms], labels = ARGV[b + G_labels],
    trace = ARGV[b + G_trace], flow = ARGV[b + G_flow] }
  local when = ARGV[b + G_when]
  local deb = ARGV[b + G_debounce]
  if deb ~= '' then
    local period, wait = string.match(deb, '^(%d+)|(%d+)$')
    j.period, j.max_wait = tonumber(period), tonumber(wait)
    if not j.period or j.flow == '' then
      return redis.error_reply('ERR chronoq enqueue: malformed job ' .. i)
    end
    when = 'd' .. int_str(j.period * 1000)
  end
  if when == 'd0' then
    j.score = cutoff -- due now, the most common
  else
    j.score = due_of(when)
  end
  -- a spec is checked once a call (most jobs of a batch share one)
  if specs_ok[j.spec] == nil then
    specs_ok[j.spec] = spec_max_attempts(j.spec) ~= nil
  end
  if not j.score or not specs_ok[j.spec] then
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
-- noted: by flow key, its jobs made pending by this call so far; cancels:
-- the jobs cancel_newest cancels (once their records are written)
local noted, cancels = {}, {}
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
  if replayed == 0 and j.period then
    -- debounced: the key's job still waiting takes this one's payload
    local d = redis.call('HGET', K_flow, FLOW_DEBOUNCE .. j.flow)
    local did, first = string.match(d or '', '^([^|]*)|(%d+)$')
    local g = did and load(did)
    if g and g[R_status] == 'scheduled' then
      local due = math.min(now + j.period, tonumber(first) + j.max_wait)
      g[R_run_at_ms] = int_str(due)
      if inline(j.payload) then
        g.p = j.payload
        redis.call('HDEL', K_data, did)
      else
        g.p = nil
        redis.call('HSET', K_data, did, j.payload)
      end
      save(did, g)
      redis.call('ZADD', K_sched, 'XX', int_str(due), did)
      note_due(due)
      emit('rescheduled', did, g[R_kind], 'scheduled', g[R_attempts])
      answer, replayed, j.score = did, 3, int_str(due)
    else
      redis.call('HSET', K_flow, FLOW_DEBOUNCE .. j.flow, j.id .. '|' .. now_str)
    end
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
    local rec = fresh_rec(STATUS_CODE[status], j.kind, j.spec, run, j.idem, j.rttl, j.labels, j.trace, p, j.flow)
    if j.period then
      redis.call('HSET', K_jobs, j.id, rec) -- now: a later job of this call may fold into it
    else
      recs[#recs + 1] = j.id
      recs[#recs + 1] = rec
    end
    local strategy = status == 'pending' and j.flow ~= '' and flow_strategy(j.flow, noted[j.flow] or 0)
    if strategy == 'cancel_newest' then
      cancels[#cancels + 1] = j
      replayed = 4
    elseif status == 'pending' then
      if strategy == 'cancel_in_progress' then
        flow_cancel_oldest(j.flow)
      end
      to_pending(j.id, j.labels, j.flow)
      if j.flow ~= '' then
        noted[j.flow] = (noted[j.flow] or 0) + 1
      end
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
for _, j in ipairs(cancels) do
  local f = load(j.id)
  f[R_last_error] = 'flow key ' .. j.flow .. ' at its max in flight (strategy cancel_newest)'
  cancel_now(j.id, f, 'flow', A_retention_ms)
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
