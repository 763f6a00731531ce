-- claim.lua: claims up to max pending jobs without blocking (the hot path).
-- First it promotes up to max scheduled jobs that are due, as promote.lua
-- does: a worker that wakes at a job's due time claims it in this one
-- round trip (and, see direct below, without it passing through a list).
-- Each claimed job gets attempts + 1, fence + 1, the token
-- "<token_base>.<i>" and a lease of visibility_ms (0: the job's own),
-- all by Redis's clock. Keys and arguments: store.Claim in internal/store/ops.go.
-- eligible: the label sets (ids joined by ",") the claimer has every label
-- of: it takes from their lists and the list of jobs without labels, the
-- list whose next job was enqueued first (ids are UUIDv7, in enqueue
-- order) first, each list in its own order.
-- want_next "1": answer a due time for the caller to wake at. wait_ms > 0:
-- when nothing is claimed the caller will wait that long on the wake
-- stream, so jobs that become pending until then add an entry to it.
-- ahead_ms > 0: a claim that takes due jobs directly (see direct below)
-- also takes those of them due within ahead_ms from now, each under a
-- lease from its due time: the caller holds it and starts it only then
-- (starts, below). A caller that cannot wait must send 0.
-- Returns: { paused, next, now_us, starts, job_1, ..., job_k } (the last
--          one through reply(): a lease earlier than all is a sweep mark): paused 1
--          when the queue is paused (then nothing is promoted or claimed),
--          "L<ms>" when the queue's limits held the claim back while jobs
--          are pending: claim again at <ms>, Redis's clock (the token
--          bucket's next token), or, with no <ms>, when a lease ends;
--          next the score of the earliest scheduled job when asked for
--          and the claim took fewer jobs than it could (it has room),
--          unless another claim was handed that score first ("" then);
--          starts "" when every job may start at once, else Redis's µs as
--          the script ends (a later reading of its clock than now_us, for
--          the caller's bound of it), a space, and job by job the µs after
--          now_us before which it must not start, comma-joined;
--          job_i is packed (see common.lua). A claimer that found nothing
--          waits on the wake stream through its group (see wakeGroup in
--          layout.go).
-- Safe to run twice: a claim's ids are kept under its token base until one
-- of its jobs is acked or taken back, and a rerun answers the same jobs.
local max, vis, wait_ms, ahead = tonumber(A_max), tonumber(A_visibility_ms), tonumber(A_wait_ms), tonumber(A_ahead_ms)
local wants_next = A_want_next == '1'
if not max or not vis or not wait_ms or not ahead then
  return redis.error_reply('ERR chronoq claim: malformed arguments')
end
local meta = redis.call('HMGET', K_meta, M_created_ms, M_paused, M_lsets, M_waiting_until, M_flow_on, unpack(LIMIT_FIELDS))
if not meta[1] then
  return { 0, '', now_us, '' } -- no such queue
end
if not sets_current(meta[3]) then
  return redis.error_reply(STALE_SETS)
end

-- starts_of answers the reply's starts (see Returns) of n jobs, t holding
-- by index the waits of those held: "" when none is.
local function starts_of(t, n)
  if next(t) == nil then
    return ''
  end
  for i = 1, n do
    t[i] = t[i] or '0'
  end
  local c = redis.call('TIME')
  return int_str(tonumber(c[1]) * 1000000 + tonumber(c[2]) + tonumber(A_offset_us)) .. ' ' .. table.concat(t, ',')
end

local prior = redis.call('HGET', K_claims, A_token_base)
if prior then
  local out, starts, n = { 0, '', now_us, '' }, {}, 0
  if wants_next and select(2, string.gsub(prior, ',', '')) + 1 < max then
    out[2] = next_due() -- the same caller, whose reply was lost (it had room)
  end
  for id in string.gmatch(prior, '[^,]+') do
    local f = load(id)
    if f and string.sub(f[R_token], 1, #A_token_base + 1) == A_token_base .. '.' then
      out[#out + 1] = packed(id, f)
      n = n + 1
      -- a job claimed ahead starts at its due time, which is before its
      -- claimed_at (see below)
      local wait = (tonumber(f[R_claimed_at_ms]) or 0) * 1000 - 1 - now_us
      if wait > 0 then
        starts[n] = int_str(wait)
      end
    end
  end
  out[4] = starts_of(starts, n)
  return rerun_reply(out, nil, { K_leases })
end
if meta[2] == '1' then
  return { 1, '', now_us, '' }
end

-- take_wake hands next to this claim unless an earlier claim was handed
-- it: of many idle workers, one wakes for each due time. The hand-out
-- holds until HAND_HOLD ms after it is due; until then a promoter leaves
-- the job to its claimer (see promote.lua), and after it promotes what is
-- due and wakes the waiting claimers, so a waker that died or is busy
-- costs that much lateness at most. A claim that took all it could gets
-- no hand-out: it may have no room when the time comes.
local function take_wake(next)
  if next == '' then
    return ''
  end
  local m = redis.call('HMGET', K_meta, M_waker, M_waker_until)
  if m[1] == next and tonumber(m[2] or '0') > now then
    return ''
  end
  redis.call('HSET', K_meta, M_waker, next, M_waker_until, math.max(math.floor(tonumber(next)), now) + HAND_HOLD)
  return next
end

-- The lists this claimer takes from: the queue's own and its eligible
-- sets'. The jobs it promotes into others wake their claimers; those into
-- its own it takes itself.
local lists, wakes, heads = { K_pending }, { K_wake }, nil
local mine = { [K_pending] = true }
for i = 1, (#A_eligible + 1) / 17 do -- set ids, as A_lsets (see sets_bind)
  local id = string.sub(A_eligible, 17 * i - 16, 17 * i - 1)
  local list = SETS.list[id]
  if list then
    lists[#lists + 1] = list
    wakes[#wakes + 1] = SETS.stream[id]
    mine[list] = true
  end
end
-- direct: a claim from the queue's own list alone, with no limits and no
-- flow keys, takes the due jobs it promotes straight to processing when
-- the list held none before them (promote_due): the same jobs in the same
-- order, without the round trip through the list and a second read and
-- write of their records.
-- With ahead, direct also takes the jobs due within ahead ms, as promote_due
-- says: direct.start[id] is the µs such a job is due at.
local direct = nil
if #lists == 1 and meta[5] ~= '1' and not meta[6] and not meta[8] then
  direct = { rec = {} }
  if ahead > 0 then
    direct.upto, direct.start = score_of_us(now_us + math.floor(ahead) * 1000), {}
  end
end
promote_due(max, mine, meta[4], direct)
local flows = meta[5] == '1' or FLOW_MADE -- the queue has had jobs with flow keys
if flows then
  flow_release()
end
local out = { 0, '', now_us, '' }
-- The queue's limits cap the claim: max becomes what they let it take.
local asked, tokens, rate = max, nil, nil
max, tokens, rate = limit_room(max, { meta[6], meta[7], meta[8], meta[9], meta[10] })
-- The jobs of flow keys are one more source, FLOW, taken in the keys'
-- turns (flow_take); its next job is the ring's first key's.
local FLOW_SRC = '\1flow'
-- With more than one source, the one whose next job was enqueued first
-- comes first (empty ones are left out).
if flows and max > 0 then
  lists, wakes, heads = by_oldest_head(lists, wakes)
  -- FLOW's next job matters only beside another source's
  local fh = #lists == 0 and '' or flow_head()
  if fh then
    local j = #lists + 1
    while j > 1 and heads[j - 1] > fh do
      j = j - 1
    end
    table.insert(lists, j, FLOW_SRC)
    table.insert(wakes, j, K_wake)
    table.insert(heads, j, false)
  end
elseif #lists > 1 then
  lists, wakes, heads = by_oldest_head(lists, wakes)
end
-- Stale ids (jobs canceled or rescheduled while pending) are dropped as
-- they come, and more are taken in their place, up to stale_budget of
-- them a call, so that a claim never answers empty, nor waits, while jobs
-- are pending behind stale ids.
local ids, leases, stale = {}, {}, 0
-- a job's spec -> its lease deadline as a string
local lease_strs = {}
-- the claimed jobs' records, written in one HSET at the end; and, by
-- claimed job, its record and whether its answer reads the data hash
local saves, reads_data, stored = {}, {}, {}
-- taken: the ids claimed so far; an id listed twice (requeued while a
-- stale copy of it waited) is claimed once, its other copy is stale
local taken = {}
-- lease_for answers the lease deadline, as a string, of a job of spec
-- whose claim takes effect at at (ms), or now: the jobs of a claim that
-- start now share one a spec
local function lease_for(spec, at)
  local lease_str = not at and lease_strs[spec]
  if not lease_str then
    local lease = (at or now) + (vis > 0 and vis or spec_visibility(spec))
    note_sweep(K_leases, lease, lease)
    lease_str = int_str(lease)
    if not at then
      lease_strs[spec] = lease_str
    end
  end
  return lease_str
end
-- starts: by claimed job held until its due time, the µs until then (the
-- others, nil here, may start at once)
local starts = {}
-- claimed notes job id claimed, its record rec as stored and whether its
-- answer reads the data hash
local function claimed(id, rec, kind, attempts, lease_str, data)
  taken[id] = true
  ids[#ids + 1] = id
  stored[#ids] = rec
  reads_data[#ids] = data
  saves[#saves + 1] = id
  saves[#saves + 1] = rec
  leases[#leases + 1] = lease_str
  leases[#leases + 1] = id
  emit('claimed', id, kind, 'processing', attempts)
end
-- the jobs promote_due handed this claim (at most max: it promoted no more)
for _, id in ipairs(direct or {}) do
  local f = direct.rec[id]
  -- Claimed ahead, its claim takes effect, and its lease runs, from the end
  -- of the ms it is due in (at). That claimed_at after now is how a
  -- release (and this claim's rerun) tells it from a job claimed due.
  local start = direct.start and direct.start[id]
  local at = start and math.floor(start / 1000) + 1
  local lease_str = lease_for(f[R_spec], at)
  f[R_status] = 'processing'
  f[R_attempts] = int_str(tonumber(f[R_attempts]) + 1)
  f[R_fence] = int_str(tonumber(f[R_fence]) + 1)
  f[R_token] = A_token_base .. '.' .. int_str(#ids + 1)
  f[R_claimed_at_ms] = at and int_str(at) or now_str
  f[R_lease_until_ms] = lease_str
  -- the upstream of a workflow's node is in the data hash (see below)
  claimed(id, encode(f), f[R_kind], f[R_attempts], lease_str, not f.p or f[R_workflow] ~= '')
  if start then
    starts[#ids] = int_str(start - now_us)
  end
end
local stale_budget = 1000
local li = 1
while #ids < max and stale <= stale_budget and li <= #lists do
  local want, popped = math.min(max - #ids, stale_budget + 1 - stale), nil
  if lists[li] == FLOW_SRC then
    popped = flow_take(want)
  elseif want == 1 and heads and heads[li] then
    popped = pop_head(lists[li], heads[li]) -- its next id is known: one read less
  else
    popped = pop_pending(lists[li], want)
  end
  if heads then
    heads[li] = nil -- the list has changed
  end
  if #popped == 0 then
    li = li + 1
  else
    -- The records, split only as far as a claim changes them (see
    -- head_fields): no table of every field, no encode.
    local recs = redis.call('HMGET', K_jobs, unpack(popped))
    for k, id in ipairs(popped) do
      local rec = recs[k]
      local pre, f, rest
      if rec and string.byte(rec, 1) ~= 45 then -- '-': a tombstone
        pre, f, rest = head_fields(rec)
      end
      if f and (f[1] == 'p' or f[1] == 'pending') and not taken[id] then
        -- the lease, by the job's spec (when the claim gives no
        -- visibility): most jobs of a claim share one
        local spec = f[3]
        local lease_str = lease_for(spec)
        local attempts = int_str((tonumber(f[6]) or 0) + 1)
        rec = pre .. STATUS_CODE.processing .. '\0' .. f[2] .. '\0' .. spec .. '\0' .. f[4] .. '\0' .. f[5] .. '\0' ..
            attempts .. '\0' .. int_str((tonumber(f[7]) or 0) + 1) .. '\0' .. A_token_base .. '.' .. int_str(#ids + 1) ..
            '\0' .. now_str .. '\0' .. lease_str
        if rest ~= '' then
          rec = rec .. '\0' .. rest
        end
        -- what packed reads of the data hash: the payload when not
        -- inline, the upstream of a workflow's node (whose field is past
        -- the tenth: only a job with such fields may have one)
        claimed(id, rec, f[2], attempts, lease_str, pre == '' or rest ~= '')
      else
        stale = stale + 1
        if FLOW_OF[id] then
          flow_stale(id) -- a flow job leaves no stale id behind (see left_pending)
          stale = stale - 1
        end
      end
    end
  end
end
if #ids > 0 then
  redis.call('HSET', K_jobs, unpack(saves))
  local fields, at = {}, {}
  for k, id in ipairs(ids) do
    if reads_data[k] then
      at[k] = #fields
      fields[#fields + 1] = id
      fields[#fields + 1] = id .. '.u'
    end
  end
  local d = #fields > 0 and redis.call('HMGET', K_data, unpack(fields)) or {}
  for k, id in ipairs(ids) do
    local payload, upstream = '', ''
    if at[k] then
      payload, upstream = d[at[k] + 1] or '', d[at[k] + 2] or ''
      if string.byte(stored[k], 1) == 2 then
        payload = '' -- inline: in the record
      end
    end
    out[#out + 1] = pack_job(id, payload, '', upstream, '', stored[k])
  end
end
if wants_next and #ids < max then
  out[2] = take_wake(next_due())
end
tokens = limit_take(tokens, #ids)
if max < asked and #ids == max and pending_count() > 0 then
  out[1] = 'L' .. limit_at(tokens, rate) -- held back by the limits
end
if stale > 0 then
  local s = tonumber(redis.call('HGET', K_meta, M_stale) or '0')
  redis.call('HSET', K_meta, M_stale, math.max(s - stale, 0))
end
if #ids > 0 then
  redis.call('ZADD', K_leases, unpack(leases))
  redis.call('HSET', K_claims, A_token_base, table.concat(ids, ','))
  if #ids == asked and tonumber(meta[4] or '0') >= now then
    -- A claimer may be waiting: more are pending, the next one takes them.
    for i = 1, #lists do
      if lists[i] == FLOW_SRC then
        if redis.call('ZCARD', K_fring) > 1 then
          wake_key(wakes[i], 1, meta[4])
        end
      elseif list_len(lists[i]) > 0 then
        wake_key(wakes[i], 1, meta[4])
      end
    end
  end
elseif wait_ms > 0 then
  mark_waiting(wait_ms) -- held back at MaxInFlight too: an ended lease writes to the stream
end
publish_events()
out[4] = starts_of(starts, #ids) -- last: the latest reading of Redis's clock
return reply(out)
