-- common.lua: follows the generated prelude (keys, arguments and record
-- fields by name, from internal/store/layout.go) and precedes every script.
--
-- Rules every script keeps:
--   * it touches only the keys in KEYS, and builds no key name;
--   * it reads and checks everything it needs before its first write, so
--     an error it raises leaves nothing half done;
--   * now is Redis's clock (TIME), never the caller's: the caller only
--     sends an offset, 0 except under a test's fake clock;
--   * it is safe to run twice: a rerun (after a lost reply) answers what
--     the first run did.

local clock = redis.call('TIME')
-- now_us: Unix µs; now: Unix ms; cutoff: now as a due score ("<ms>.<µs>").
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + tonumber(A_offset_us)
local now = math.floor(now_us / 1000)
local cutoff = string.format('%d.%03d', now, now_us % 1000)

-- now_str is now as a string, once: Lua writes a number into a string
-- (a record field, a concatenation) with sprintf("%.14g"), which costs
-- Redis about as much as a redis.call. Integers that go into records are
-- written with int_str ('%d' costs half as much).
local now_str = string.format('%d', now)

local function int_str(x)
  return string.format('%d', x)
end

-- num reads a decimal number as tonumber does, and also the exponent forms
-- ("1e-05", "1e+06") Go's %g writes, which some Lua engines read as nil
-- (gopher-lua, the embedded Redis's): chronoq writes decimals, and reads
-- what it once wrote in that form too.
local function num(s)
  local x = tonumber(s)
  if x or type(s) ~= 'string' then
    return x
  end
  local m, e = string.match(s, '^%s*([-+]?%d*%.?%d*)[eE]([-+]?%d+)%s*$')
  m, e = tonumber(m or ''), tonumber(e or '')
  if m and e then
    return m * 10 ^ e
  end
  return nil
end

-- score_of_us writes Unix µs as a due score, "<ms>.<µs>".
local function score_of_us(us)
  return string.format('%d.%03d', math.floor(us / 1000), us % 1000)
end

-- due_of answers the score of a "when" argument: "d<µs>" a delay after
-- now, "a<score>" an absolute due score; nil when malformed.
local function due_of(when)
  local kind, v = string.sub(when, 1, 1), string.sub(when, 2)
  if kind == 'd' then
    local d = tonumber(v)
    if not d then
      return nil
    end
    return score_of_us(now_us + d)
  elseif kind == 'a' and tonumber(v) then
    return v
  end
  return nil
end

-- Records -----------------------------------------------------------------

-- A record is stored without its trailing empty fields, and with its
-- payload in front when that is small (see recInline in
-- internal/store/layout.go): "\2<payload>\0<fields>". load answers the fields as
-- a table of NREC (or more, from a newer version) with the payload, if
-- inline, as its field p; save writes them back so.

-- new_record answers a record of NREC empty fields, built by one
-- constructor: filling an empty table field by field grows it five times
-- over. (TestNewRecordHasEveryField holds it to the layout's fields.)
local function new_record()
  return { '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '' }
end

local function split(rec)
  -- string.find over the NULs: half the time of one pattern of NREC
  -- captures, and a short record (most are) costs only its own fields.
  local f = new_record()
  local i, pos = 1, 1
  while true do
    local e = string.find(rec, '\0', pos, true)
    if not e then
      f[i] = string.sub(rec, pos)
      return f
    end
    f[i] = string.sub(rec, pos, e - 1)
    i, pos = i + 1, e + 1
  end
end

-- decode answers a stored record (HGET's value, false or nil for none) as
-- load does.
local function decode(rec)
  if not rec then
    return nil
  end
  local first = string.byte(rec, 1)
  if first == 45 then -- '-': a tombstone
    return nil
  end
  local payload
  if first == 2 then -- REC_INLINE
    local e = string.find(rec, '\0', 2, true)
    payload, rec = string.sub(rec, 2, e - 1), string.sub(rec, e + 1)
  end
  local f = split(rec) -- NREC fields at least
  -- the fields encode left short, spelled out
  f[R_status] = STATUS_OF_CODE[f[R_status]] or f[R_status]
  local run = f[R_run_at_ms]
  if run == '' then
    f[R_run_at_ms] = f[R_enqueued_at_ms]
  elseif string.byte(run, 1) == 43 then -- '+': ms after enqueued_at
    f[R_run_at_ms] = int_str(tonumber(f[R_enqueued_at_ms]) + tonumber(string.sub(run, 2)))
  end
  if f[R_attempts] == '' then
    f[R_attempts] = '0'
  end
  if f[R_fence] == '' then
    f[R_fence] = '0'
  end
  f.p = payload
  return f
end

-- head_fields splits a stored record (not a tombstone) for a claim, which
-- changes only its first fields: it answers the inline payload's prefix
-- ("\2<payload>\0", "" when the payload is in the data hash), the first
-- seven fields as stored (status code, kind, spec, enqueued_at, run_at,
-- attempts, fence; "" past a short record's end) and the fields after
-- the tenth, joined as stored ("" for none): a table of seven fields, not
-- decode's of every field spelled out, and no encode after.
local function head_fields(rec)
  local pre, b = '', 1
  if string.byte(rec, 1) == 2 then -- REC_INLINE
    b = string.find(rec, '\0', 2, true) + 1
    pre = string.sub(rec, 1, b - 1)
  end
  local f = { '', '', '', '', '', '', '' }
  for i = 1, 7 do
    local e = string.find(rec, '\0', b, true)
    if not e then
      f[i] = string.sub(rec, b)
      return pre, f, ''
    end
    f[i] = string.sub(rec, b, e - 1)
    b = e + 1
  end
  for _ = 8, 10 do -- token, claimed_at, lease_until: the claim writes them
    local e = string.find(rec, '\0', b, true)
    if not e then
      return pre, f, ''
    end
    b = e + 1
  end
  return pre, f, string.sub(rec, b)
end

-- load answers a job's record as a table, nil when there is no job (a
-- tombstone is no job: see tomb_of).
local function load(id)
  return decode(redis.call('HGET', K_jobs, id))
end

-- load_many answers the records of ids (decode's tables, nil where there
-- is no job: read it by index up to #ids, not with ipairs) in one HMGET.
local function load_many(ids)
  local recs = redis.call('HMGET', K_jobs, unpack(ids))
  local out = {}
  for i = 1, #ids do
    out[i] = decode(recs[i])
  end
  return out
end

-- tomb_of answers the ack kept by a job's tombstone ("" when it has
-- none), or nil when there is no tombstone.
local function tomb_of(id)
  local rec = redis.call('HGET', K_jobs, id)
  if rec and string.sub(rec, 1, 1) == '-' then
    return string.sub(rec, 2)
  end
  return nil
end

-- encode answers f as it is stored: the status is its code, run_at is ""
-- when it is enqueued_at (enqueue.lua also writes it as "+<ms after
-- enqueued_at>"), attempts and fence are "" for "0", the trailing empty
-- fields are left out, and the inline payload f.p is in front. decode
-- spells them out again (and so does the client, which reads this form in
-- every reply: see packed).
local function encode(f)
  local status, run, attempts, fence = f[R_status], f[R_run_at_ms], f[R_attempts], f[R_fence]
  f[R_status] = STATUS_CODE[status] or status
  if run == f[R_enqueued_at_ms] then
    f[R_run_at_ms] = ''
  end
  if attempts == '0' then
    f[R_attempts] = ''
  end
  if fence == '0' then
    f[R_fence] = ''
  end
  local last = #f
  while last > 1 and f[last] == '' do
    last = last - 1
  end
  local fields = table.concat(f, '\0', 1, last)
  f[R_status], f[R_run_at_ms], f[R_attempts], f[R_fence] = status, run, attempts, fence
  if f.p then
    return REC_INLINE .. f.p .. '\0' .. fields
  end
  return fields
end

-- fresh_rec answers a new job's record as encode would store it, built
-- directly (a one-job enqueue spends a fifth of its script on new_record
-- and encode otherwise): status its code, run "" (due at enqueue) or
-- "+<ms after enqueue>", payload nil when not inline, and the fields a
-- new job may have, "" for none; the others are empty.
local function fresh_rec(code, kind, spec, run, idem, rttl, labels, trace, payload, flow)
  local rec = code .. '\0' .. kind .. '\0' .. spec .. '\0' .. now_str
  if run ~= '' or idem ~= '' or rttl ~= '' or labels ~= '' or trace ~= '' or flow ~= '' then
    -- the later fields, each at its index, up to the last not empty
    local later = { R_run_at_ms, run, R_idempotency_key, idem, R_result_ttl_ms, rttl, R_labels, labels, R_trace, trace,
      R_flow, flow }
    local last = 0
    for i = 2, #later, 2 do
      if later[i] ~= '' then
        last = i
      end
    end
    local parts, at = { rec }, R_enqueued_at_ms
    for i = 2, last, 2 do
      parts[#parts + 1] = string.rep('\0', later[i - 1] - at) .. later[i]
      at = later[i - 1]
    end
    rec = table.concat(parts)
  end
  if payload then
    return REC_INLINE .. payload .. '\0' .. rec
  end
  return rec
end

-- save writes f as id's record, and answers it as stored (see encode).
local function save(id, f)
  local stored = encode(f)
  redis.call('HSET', K_jobs, id, stored)
  return stored
end


-- inline answers whether payload goes into its job's record (f.p) rather
-- than the data hash: a JSON payload of at most INLINE_MAX bytes (a NUL
-- would end it early; JSON holds none, but a script checks).
local function inline(payload)
  return #payload > 0 and #payload <= INLINE_MAX and not string.find(payload, '\0', 1, true)
end

-- spec: "<max_attempts>|<visibility_ms>|<backoff>", or SPEC_DEFAULT_CODE
-- for SPEC_DEFAULT; spec_full spells the code out.
local function spec_full(spec)
  if spec == SPEC_DEFAULT_CODE then
    return SPEC_DEFAULT
  end
  return spec
end

local function spec_max_attempts(spec)
  return tonumber(string.match(spec_full(spec), '^(%d+)|'))
end

local function spec_visibility(spec)
  return tonumber(string.match(spec_full(spec), '^%d+|(%d+)|'))
end

-- spec_backoff answers the backoff's initial ms, factor, max ms and jitter.
local function spec_backoff(spec)
  local initial, factor, maxd, jitter = string.match(spec_full(spec), '^%d+|%d+|([^:|]+):([^:]+):([^:]+):([^:]+)$')
  return tonumber(initial), num(factor), tonumber(maxd), num(jitter)
end

-- token_base is the claim a token belongs to: "<base>.<i>" -> base.
local function token_base(token)
  -- a find of the suffix, not '^(.*)%.%d+$', which backtracks from the
  -- end of the token once for every byte of it
  local dot = string.find(token, '%.%d+$')
  if not dot or dot == 1 then
    return nil
  end
  return string.sub(token, 1, dot - 1)
end

-- Counters ------------------------------------------------------------------

local function count(field, n)
  if n ~= 0 then
    redis.call('HINCRBY', K_meta, field, int_str(n))
  end
end

-- Events --------------------------------------------------------------------
-- One line "type|id|kind|status|attempts|at_ms" per state change. Lines
-- are collected and published in one message by publish_events(), the
-- last thing a script does. When a script has a second line to build, it
-- first asks (with PUBLISH, on one server) whether anyone listens, and
-- builds no more lines when no one does: that is much of a batch's Redis
-- time. (A cluster's shard channels may be subscribed on a replica, which
-- the primary cannot count: with SPUBLISH the lines are always built.)
-- A failed publish cannot fail the script: events are a view.

local event_lines = {}
local muted = A_pubcmd == ''

local function emit(typ, id, kind, status, attempts)
  if muted then
    return
  end
  if #event_lines == 1 and A_pubcmd == 'PUBLISH' and redis.call('PUBSUB', 'NUMPAT') == 0
      and redis.call('PUBSUB', 'NUMSUB', A_channel)[2] == 0 then
    muted = true
    event_lines = {}
    return
  end
  event_lines[#event_lines + 1] = typ .. '|' .. id .. '|' .. (kind or '') .. '|' .. status .. '|' ..
      ((attempts ~= '' and attempts) or '0') .. '|' .. now_str
end

local function publish_events()
  if #event_lines > 0 then
    redis.pcall(A_pubcmd, A_channel, table.concat(event_lines, '\n'))
    event_lines = {}
  end
end

-- The queue's keys --------------------------------------------------------

-- exists answers whether the queue has been created (K_meta is declared
-- by every script that calls it).
local function exists()
  return redis.call('HEXISTS', K_meta, M_created_ms) == 1
end

-- The pending list keeps its sentinel rightmost: ids enter at the left
-- and leave at the right, just left of the sentinel. The list is never
-- empty, not even for a moment inside a script: during a slot migration a
-- key that a script emptied and writes again counts as a key the node
-- does not hold, and the script would fail half done.

-- pop_pending takes up to n ids from the right end of the pending list
-- key (K_pending or a label set's).
local function pop_pending(key, n)
  local ids = redis.call('LRANGE', key, int_str(-(n + 1)), '-2') -- oldest last
  local k = #ids
  if k == 0 then
    return {}
  end
  -- The sentinel moves onto the leftmost id taken, and the trim takes
  -- the rest and the old sentinel.
  local at = int_str(-(k + 1))
  redis.call('LSET', key, at, SENTINEL)
  redis.call('LTRIM', key, '0', at)
  local out = {}
  for i = k, 1, -1 do
    out[#out + 1] = ids[i]
  end
  return out
end

-- pop_head takes id, read as the next id of the pending list key by this
-- script (the list unchanged since), as pop_pending(key, 1) would.
local function pop_head(key, id)
  redis.call('LSET', key, '-2', SENTINEL)
  redis.call('LTRIM', key, '0', '-2')
  return { id }
end

-- push_front puts ids at the right end of the pending list key, next to
-- be claimed (the last id first).
local function push_front(key, ids)
  redis.call('LSET', key, -1, ids[1])
  for i = 2, #ids do
    redis.call('RPUSH', key, ids[i])
  end
  redis.call('RPUSH', key, SENTINEL)
end

-- list_len is the number of ids in the pending list key (stale ones
-- included), less its sentinel.
local function list_len(key)
  return redis.call('LLEN', key) - 1
end

-- Label sets (see internal/store/layout.go and queue/labels.go) ----------------------
-- A job that requires labels is pending in its label set's list, and
-- wakes claimers on its set's wake stream. The keys of the sets follow the
-- script's declared keys (KEYS[NKEYS + 1] on), a list and a stream for
-- each id of A_lsets, in its order.

-- SETS are the sets declared to this script: ids in order, and each one's
-- list and wake stream by id (list, stream).
local SETS = { ids = {}, list = {}, stream = {} }

-- STALE_SETS is the answer of a script given other label sets than the
-- queue's: it writes nothing, and the client reads the sets again.
local STALE_SETS = 'ERR chronoq stale label sets'

-- sets_bind reads the sets declared to this script into SETS. Set ids are
-- 16 hex digits: the i-th starts at byte 17 * (i - 1) + 1 of A_lsets.
local function sets_bind()
  for i = 1, (#A_lsets + 1) / 17 do
    local id = string.sub(A_lsets, 17 * i - 16, 17 * i - 1)
    SETS.ids[i] = id
    SETS.list[id] = KEYS[NKEYS + 2 * i - 1]
    SETS.stream[id] = KEYS[NKEYS + 2 * i]
  end
end

-- sets_current binds the declared sets and answers whether they are all
-- of the queue's, as its meta lists them (current: that field, read when
-- nil). (Scripts that call it declare K_meta.)
local function sets_current(current)
  if current == nil then
    current = redis.call('HGET', K_meta, M_lsets)
  end
  if (current or '') ~= A_lsets then
    return false
  end
  sets_bind()
  return true
end

-- set_of answers the id of a label set: its canonical labels' SHA-1, the
-- first 16 hex digits (queue.labelSetID computes the same).
local set_memo = {}
local function set_of(labels)
  local id = set_memo[labels]
  if not id then
    id = string.sub(redis.sha1hex(labels), 1, 16)
    set_memo[labels] = id
  end
  return id
end

-- pending_of answers the pending list and wake stream of a job, from its
-- labels (its record's field, canonical; nil or "" for none). A set is registered before any job requiring it is written
-- (enqueue.lua), and every script that makes a job pending is given all
-- the queue's sets (sets_current): a set not declared here cannot be, and
-- raises.
local function pending_of(labels)
  if not labels or labels == '' then
    return K_pending, K_wake
  end
  local id = set_of(labels)
  local list = SETS.list[id]
  if not list then
    error('chronoq: the label set ' .. labels .. ' is not declared')
  end
  return list, SETS.stream[id]
end

-- by_oldest_head orders pending lists (given with their wake streams) by
-- their next job, the one enqueued first first (job ids are UUIDv7: they
-- sort in enqueue order, to the millisecond); empty lists are left out.
-- It answers the lists, their streams, and their next ids.
local function by_oldest_head(lists, wakes)
  local ks, ws, hs = {}, {}, {}
  for i, key in ipairs(lists) do
    local h = redis.call('LINDEX', key, '-2')
    if h then -- insertion in order: a claimer's lists are few
      local j = #hs + 1
      while j > 1 and hs[j - 1] > h do
        hs[j], ks[j], ws[j] = hs[j - 1], ks[j - 1], ws[j - 1]
        j = j - 1
      end
      hs[j], ks[j], ws[j] = h, key, wakes[i]
    end
  end
  return ks, ws, hs
end

-- pending_count is the number of pending jobs: the lists, less their
-- sentinels, less the ids of jobs that left pending without leaving a
-- list (canceled or rescheduled: taking them out would be an O(N) LREM).
local function pending_count()
  local n = list_len(K_pending)
  for _, id in ipairs(SETS.ids) do
    n = n + list_len(SETS.list[id])
  end
  n = n + math.max(redis.call('ZCARD', K_fpend) - 1, 0)
  return n - tonumber(redis.call('HGET', K_meta, M_stale) or '0')
end

-- Limits (see Limits in queue/limits.go) -----------------------------------
-- (Scripts that call limit_room declare K_meta and K_leases.)

-- LIMIT_FIELDS are the meta fields limit_room reads, in its order: the
-- settings (rate a second, burst, most jobs leased at once) and the token
-- bucket's state (tokens left, and the ms they were counted at).
local LIMIT_FIELDS = { M_limit_rate, M_limit_burst, M_limit_inflight, M_tb_tokens, M_tb_ms }

-- limit_room answers how many of want jobs the queue's limits let a claim
-- take now, from lim, the values of LIMIT_FIELDS; and the bucket's tokens,
-- refilled to now by Redis's clock, and its rate (nil, nil: no rate
-- limit), for limit_take and limit_at. It writes nothing.
local function limit_room(want, lim)
  local room, tokens = want, nil
  local rate = num(lim[1] or '')
  if rate and rate > 0 then
    local burst = math.max(tonumber(lim[2] or '') or 1, 1)
    local last = tonumber(lim[5] or '') or now
    tokens = math.min(burst, (tonumber(lim[4] or '') or burst) + math.max(now - last, 0) * rate / 1000)
    room = math.min(room, math.floor(tokens + 0.000000001))
  else
    rate = nil
  end
  local cap = tonumber(lim[3] or '')
  if cap then
    room = math.min(room, cap - (redis.call('ZCARD', K_leases) - 1))
  end
  return math.max(room, 0), tokens, rate
end

-- limit_take stores the bucket after a claim took n of its tokens, and
-- answers the tokens left.
local function limit_take(tokens, n)
  if not tokens then
    return nil
  end
  redis.call('HSET', K_meta, M_tb_tokens, string.format('%.6f', tokens - n), M_tb_ms, now_str)
  return tokens - n
end

-- limit_at is the ms at which the bucket holds a whole token again, ""
-- when it does now or there is no rate limit (then only a lease ending
-- can make room).
local function limit_at(tokens, rate)
  if not tokens or tokens >= 1 - 0.000000001 then
    return ''
  end
  return tostring(now + math.max(math.ceil((1 - tokens) * 1000 / rate), 1))
end

-- wake_key tells claimers waiting on the wake stream key that n jobs
-- became pending, when one may be waiting (a claim that found nothing and
-- is about to wait marks waiting_until; a script that read it already
-- passes it).
local function wake_key(key, n, waiting_until)
  if n > 0 and tonumber(waiting_until or redis.call('HGET', K_meta, M_waiting_until) or '0') >= now then
    redis.call('XADD', key, 'MAXLEN', '1', '*', 'n', int_str(n))
  end
end

-- wake is wake_key of the queue's own wake stream (jobs without labels,
-- and leases that ended).
local function wake(n, waiting_until)
  wake_key(K_wake, n, waiting_until)
end

-- Flow keys (see FlowKeys in internal/store/layout.go and queue/flow.go) --
-- A pending job with a flow key waits in K_fpend, not in a list, as
-- "<key>\0<id>" (every score 0: by key, then id, the first enqueued
-- first); a processing one in K_frun, the same way. So a key's jobs are a
-- lexicographic range, counted (ZLEXCOUNT) and taken (ZRANGEBYLEX) in
-- O(log N) whatever the number of keys. The keys a claim may take a job
-- of now are in K_fring, scored by turn: a claim takes a job of the
-- lowest, and puts the key back one turn later (1/weight), so keys take
-- turns; a key that comes into the ring enters at the current turn
-- (meta's flow_turn), behind the keys waiting there, ahead of every key
-- already served this turn. A key leaves the ring at its MaxInFlight
-- (a lease's end brings it back), when its rate holds it (it waits in
-- K_fwait until its next token), or with nothing pending. K_fcount
-- counts each key's pending and processing jobs; a key with none is
-- forgotten, its bucket when full (K_fwait holds it until then).

-- FLOW is the queue's per-key limits, read once a call (flow_conf), and
-- the limits of each key looked at (lim, by key: flow_limits).
local FLOW = nil

local function flow_conf()
  if not FLOW then
    local m = redis.call('HMGET', K_meta, M_flow_inflight, M_flow_rate, M_flow_burst, M_flow_strategy, M_flow_turn)
    FLOW = { cap = tonumber(m[1] or ''), rate = num(m[2] or ''), burst = tonumber(m[3] or ''),
      strategy = m[4] or 'queue', turn = tonumber(m[5] or '') or 0, lim = {} }
  end
  return FLOW
end

-- flow_limits answers key's limits: { cap, rate, burst, weight }, cap and
-- rate nil for none; its override's fields replace the queue's.
local function flow_limits(key)
  local c = flow_conf()
  local l = c.lim[key]
  if l then
    return l
  end
  l = { cap = c.cap, rate = c.rate, burst = c.burst, weight = 1 }
  local o = redis.call('HGET', K_fover, key)
  if o then
    local ocap, orate, oburst, ow = string.match(o, '^(%d*)|([^|]*)|(%d*)|(%d*)$')
    if (tonumber(ocap or '') or 0) > 0 then
      l.cap = tonumber(ocap)
    end
    if (num(orate or '') or 0) > 0 then
      l.rate, l.burst = num(orate), tonumber(oburst)
    end
    l.weight = math.max(tonumber(ow or '') or 1, 1)
  end
  if l.rate and l.rate > 0 then
    l.burst = math.max(l.burst or 1, 1)
  else
    l.rate = nil
  end
  c.lim[key] = l
  return l
end

-- flow_n counts flow key flow's members of key (K_fpend or K_frun).
local function flow_n(key, flow)
  return redis.call('ZLEXCOUNT', key, '[' .. flow .. '\0', '(' .. flow .. '\1')
end

-- flow_tokens answers key's bucket refilled to now (nil: no rate).
local function flow_tokens(key, l)
  if not l.rate then
    return nil
  end
  local b = redis.call('HGET', K_flow, FLOW_BUCKET .. key)
  if not b then
    return l.burst -- a key not seen lately starts full
  end
  local t, ms = string.match(b, '^([^|]*)|(%d+)$')
  t, ms = num(t or ''), tonumber(ms or '')
  if not t or not ms then
    return l.burst
  end
  return math.min(l.burst, t + math.max(now - ms, 0) * l.rate / 1000)
end

-- flow_token_at is the ms at which a bucket of tokens holds one again.
local function flow_token_at(tokens, rate)
  return now + math.max(math.ceil((1 - tokens) * 1000 / rate), 1)
end

-- FLOW_WOKE: a key came into the ring (claimers waiting are woken once).
-- FLOW_MADE: flow jobs became pending in this call.
local FLOW_WOKE, FLOW_MADE = false, false

-- flow_ready puts key into the ring at the current turn when it has jobs
-- pending, room under its MaxInFlight and a token; held by its rate, it
-- waits in K_fwait for its next token instead.
local function flow_ready(key)
  if redis.call('ZSCORE', K_fring, key) then
    return
  end
  local l = flow_limits(key)
  if l.cap and flow_n(K_frun, key) >= l.cap then
    return -- the end of one of its leases brings it back
  end
  if flow_n(K_fpend, key) == 0 then
    return
  end
  if l.rate then
    local tokens = flow_tokens(key, l)
    if tokens < 1 - 0.000000001 then
      redis.call('ZADD', K_fwait, flow_token_at(tokens, l.rate), key)
      return
    end
    redis.call('ZREM', K_fwait, key) -- an idle key's, there to forget its bucket
  end
  redis.call('ZADD', K_fring, flow_conf().turn, key)
  FLOW_WOKE = true
end

-- flow_idle forgets key once it has no jobs pending or processing: it
-- leaves K_fcount, and its bucket goes when full (K_fwait holds the key
-- until then).
local function flow_idle(key)
  redis.call('ZREM', K_fcount, key)
  redis.call('ZREM', K_fring, key)
  local l = flow_limits(key)
  local tokens = flow_tokens(key, l)
  if tokens and tokens < l.burst - 0.000000001 then
    redis.call('ZADD', K_fwait, now + math.ceil((l.burst - tokens) * 1000 / l.rate), key)
  else
    redis.call('HDEL', K_flow, FLOW_BUCKET .. key)
    redis.call('ZREM', K_fwait, key)
  end
end

-- flow_counted adds d to key's count of jobs, and forgets it at none.
local function flow_counted(key, d)
  if tonumber(redis.call('ZINCRBY', K_fcount, d, key)) <= 0 then
    flow_idle(key)
  end
end

-- flow_unrun ends the processing of job id of key (complete, fail,
-- reclaim, release, cancel): its slot is free, the key may take its turn
-- again.
local function flow_unrun(key, id)
  if redis.call('ZREM', K_frun, key .. '\0' .. id) == 1 then
    flow_counted(key, -1)
    flow_ready(key)
    if FLOW_WOKE then
      wake(1)
      FLOW_WOKE = false
    end
  end
end

-- lease_ended is flow_unrun for job id of record f, if it has a flow key.
local function lease_ended(id, f)
  if f[R_flow] ~= '' then
    flow_unrun(f[R_flow], id)
  end
end

-- flow_unpend takes job id of key out of pending (canceled, rescheduled,
-- aborted) without a claim.
local function flow_unpend(key, id)
  if redis.call('ZREM', K_fpend, key .. '\0' .. id) == 1 then
    if flow_n(K_fpend, key) == 0 then
      redis.call('ZREM', K_fring, key) -- no turn for a key with nothing pending
    end
    flow_counted(key, -1)
  end
end

-- left_pending is for a job that leaves pending without a claim: a flow
-- job leaves its key's set; another's id stays in its list, counted
-- stale, until a claim pops and drops it (no O(N) LREM).
local function left_pending(id, f)
  if f[R_flow] ~= '' then
    flow_unpend(f[R_flow], id)
  else
    redis.call('HINCRBY', K_meta, M_stale, '1')
  end
end

-- flow_release brings back the keys of K_fwait whose time came: into the
-- ring (or to wait for their next token again, or at their MaxInFlight
-- out of both); an idle key's full bucket is forgotten.
local function flow_release()
  local due = redis.call('ZRANGEBYSCORE', K_fwait, '-inf', now_str, 'LIMIT', '0', '100')
  if #due == 0 then
    return
  end
  redis.call('ZREM', K_fwait, unpack(due))
  for _, key in ipairs(due) do
    if flow_n(K_fpend, key) > 0 then
      flow_ready(key)
    elseif flow_n(K_frun, key) == 0 then
      flow_idle(key)
    end
  end
end

-- flow_head answers the id of the job the next flow_take would take
-- first (of the ring's first key), nil when no key is in the ring.
local function flow_head()
  local head = redis.call('ZRANGE', K_fring, '0', '0')
  if not head[1] or head[1] == SENTINEL then
    return nil
  end
  local m = redis.call('ZRANGEBYLEX', K_fpend, '[' .. head[1] .. '\0', '(' .. head[1] .. '\1', 'LIMIT', '0', '1')
  if not m[1] then
    return ''
  end
  return string.sub(m[1], #head[1] + 2)
end

-- flow_take takes up to want pending jobs of the ring's keys, a turn
-- each: one job of the first key, which goes back one turn later if it
-- has more and room; all it can of a key alone in the ring. It moves them
-- to K_frun and answers their ids, and by id its key (FLOW_OF), for
-- flow_stale.
local FLOW_OF = {}
local function flow_take(want)
  local ids = {}
  local c = flow_conf()
  local turns = 0
  while #ids < want and turns < want + 100 do
    turns = turns + 1
    local head = redis.call('ZRANGE', K_fring, '0', '1', 'WITHSCORES')
    local key, turn = head[1], tonumber(head[2])
    if not key or key == SENTINEL then
      break
    end
    local l = flow_limits(key)
    local room = 1
    if not head[3] or head[3] == SENTINEL then
      room = want - #ids -- alone in the ring
    end
    local running = nil
    if l.cap then
      running = flow_n(K_frun, key)
      room = math.min(room, l.cap - running)
    end
    local tokens = flow_tokens(key, l)
    if tokens then
      room = math.min(room, math.floor(tokens + 0.000000001))
    end
    local members = {}
    if room > 0 then
      -- one more than it takes: whether the key has more after
      members = redis.call('ZRANGEBYLEX', K_fpend, '[' .. key .. '\0', '(' .. key .. '\1', 'LIMIT', '0', int_str(room + 1))
    end
    local more = #members > room
    if more then
      members[#members] = nil
    end
    if #members > 0 then
      redis.call('ZREM', K_fpend, unpack(members))
      local run = {}
      for _, m in ipairs(members) do
        local id = string.sub(m, #key + 2)
        ids[#ids + 1] = id
        FLOW_OF[id] = key
        run[#run + 1] = 0
        run[#run + 1] = m
      end
      redis.call('ZADD', K_frun, unpack(run))
      if tokens then
        tokens = tokens - #members
        redis.call('HSET', K_flow, FLOW_BUCKET .. key, string.format('%.6f', tokens) .. '|' .. now_str)
      end
      c.turn = turn
      -- the key's next turn: one later (1/weight), when it can take one then
      if more and not (running and running + #members >= l.cap) then
        if tokens and tokens < 1 - 0.000000001 then
          redis.call('ZREM', K_fring, key)
          redis.call('ZADD', K_fwait, flow_token_at(tokens, l.rate), key)
        else
          redis.call('ZADD', K_fring, turn + 1 / l.weight, key)
        end
      else
        redis.call('ZREM', K_fring, key) -- a lease's end or a new job brings it back
      end
    else
      redis.call('ZREM', K_fring, key)
      flow_ready(key) -- held by its rate (to K_fwait), or at its cap, or empty
    end
  end
  if #ids > 0 then
    redis.call('HSET', K_meta, M_flow_turn, c.turn)
  end
  return ids
end

-- flow_strategy answers the strategy (meta's flow_strategy) that acts on
-- a new job of key due now: none (nil) unless the key has its max in
-- flight of jobs processing and pending already, counting more jobs
-- noted pending by this call and not yet in K_fpend (see enqueue.lua).
local function flow_strategy(key, more)
  local c = flow_conf()
  if c.strategy == 'queue' then
    return nil
  end
  local l = flow_limits(key)
  if not l.cap or flow_n(K_frun, key) + flow_n(K_fpend, key) + more < l.cap then
    return nil
  end
  return c.strategy
end

-- flow_cancel_oldest asks key's oldest processing job not asked yet to
-- cancel (its worker sees it at its next heartbeat).
local function flow_cancel_oldest(key)
  local run = redis.call('ZRANGEBYLEX', K_frun, '[' .. key .. '\0', '(' .. key .. '\1', 'LIMIT', '0', '100')
  for _, m in ipairs(run) do
    local rid = string.sub(m, #key + 2)
    local g = load(rid)
    if g and g[R_status] == 'processing' and g[R_cancel_requested] ~= '1' then
      g[R_cancel_requested] = '1'
      save(rid, g)
      emit('cancel_requested', rid, g[R_kind], 'processing', g[R_attempts])
      return
    end
  end
end

-- flow_stale drops from K_frun a job flow_take took that was not pending
-- after all (its record says otherwise: canceled while pending without
-- leaving K_fpend, which no script does, or gone).
local function flow_stale(id)
  local key = FLOW_OF[id]
  if key and redis.call('ZREM', K_frun, key .. '\0' .. id) == 1 then
    flow_counted(key, -1)
  end
end

-- Making jobs pending: to_pending(id, labels) notes each job (it writes
-- nothing, and raises before any write for a set not declared), then
-- flush_pending pushes them, each onto its set's list, and wakes each
-- list's waiting claimers.
local pend_by, pend_keys = {}, {}
-- pend_flow: the flow jobs noted, "<key>\0<id>" and their keys in order
local pend_flow, pend_flow_keys = {}, {}
local function to_pending(id, labels, flow)
  if flow and flow ~= '' then
    pend_flow[#pend_flow + 1] = flow .. '\0' .. id
    pend_flow_keys[#pend_flow_keys + 1] = flow
    return
  end
  local key, wk = pending_of(labels)
  local g = pend_by[key]
  if not g then
    g = { wake = wk }
    pend_by[key] = g
    pend_keys[#pend_keys + 1] = key
  end
  g[#g + 1] = id
end

-- flush_flow puts the flow jobs to_pending noted into K_fpend, counts
-- them, makes their keys ready, and forgets a debounced job's entry once
-- it is pending (see enqueue.lua). Answers how many.
local function flush_flow()
  local n = #pend_flow
  if n == 0 then
    return 0
  end
  local add, by = {}, {}
  for i, m in ipairs(pend_flow) do
    add[#add + 1] = 0
    add[#add + 1] = m
    local key = pend_flow_keys[i]
    if not by[key] then
      by[key] = {}
      by[#by + 1] = key
    end
    by[key][#by[key] + 1] = string.sub(m, #key + 2)
  end
  redis.call('ZADD', K_fpend, unpack(add))
  redis.call('HSET', K_meta, M_flow_on, '1')
  FLOW_MADE = true
  for _, key in ipairs(by) do
    redis.call('ZINCRBY', K_fcount, #by[key], key)
    local d = redis.call('HGET', K_flow, FLOW_DEBOUNCE .. key)
    if d then
      local did = string.match(d, '^([^|]*)|')
      for _, id in ipairs(by[key]) do
        if id == did then
          redis.call('HDEL', K_flow, FLOW_DEBOUNCE .. key)
        end
      end
    end
    flow_ready(key)
  end
  pend_flow, pend_flow_keys = {}, {}
  return n
end

-- flush_pending pushes what to_pending noted, at the left (behind the
-- others), or at the right (next to be claimed) with front; with wakes,
-- wakes each list's claimers (waiting_until: see wake_key): true for
-- every list, or a table of the lists whose claimers are not to be woken
-- (a claim's own, which it takes from itself). Flow jobs go to their
-- keys (flush_flow), and wake the queue's own claimers (those of K_pending).
-- Answers how many.
local function flush_pending(front, wakes, waiting_until)
  local n = flush_flow()
  for _, key in ipairs(pend_keys) do
    local g = pend_by[key]
    if front then
      push_front(key, g)
    else
      redis.call('LPUSH', key, unpack(g))
    end
    if wakes == true or wakes and not wakes[key] then
      wake_key(g.wake, #g, waiting_until)
    end
    n = n + #g
  end
  if FLOW_WOKE and (wakes == true or wakes and not wakes[K_pending]) then
    wake_key(K_wake, 1, waiting_until)
  end
  FLOW_WOKE = false
  pend_by, pend_keys = {}, {}
  return n
end

-- mark_waiting marks that a claimer waits on the wake stream until
-- wait_ms from now: scripts that make jobs claimable write to it then.
local function mark_waiting(wait_ms)
  local till = now + wait_ms
  if tonumber(redis.call('HGET', K_meta, M_waiting_until) or '0') < till then
    redis.call('HSET', K_meta, M_waiting_until, int_str(till))
  end
end

-- lease_freed tells claimers that n leases ended, when the queue has a
-- MaxInFlight limit (see limit_room): a claim it held back waits on the
-- wake streams for a lease to end, not on a timer. It wakes the claimers
-- that could use the room: the queue's own stream's when jobs without
-- labels are pending, and each label set's whose list holds jobs (its
-- claimers; O(sets), at most MaxLabelSets). Scripts that call it bind
-- the queue's sets first (sets_current), or a set's claimers would wait
-- for their next poll.
-- limited is whether the queue has that limit, when the script read it
-- already (lease_bind); nil: read it here.
local function lease_freed(n, limited)
  if n == 0 then
    return
  end
  if limited == nil then
    limited = redis.call('HGET', K_meta, M_limit_inflight)
  end
  if limited then
    local waiting_until = redis.call('HGET', K_meta, M_waiting_until) or '0'
    if tonumber(waiting_until) < now then
      return -- no claimer waits: no list to look at (wake_key would write nothing)
    end
    if list_len(K_pending) > 0 then
      wake(n, waiting_until)
    end
    for _, id in ipairs(SETS.ids) do
      if list_len(SETS.list[id]) > 0 then
        wake_key(SETS.stream[id], n, waiting_until)
      end
    end
  end
end

-- hooks_on: whether the queue's meta says a webhook subscription may want
-- its events (see hook_open), read once a call; nil until then.
local hooks_on

-- lease_bind is for a script that ends leases (complete, cancel, fail):
-- when it makes no job pending (pends false), only lease_freed needs the
-- queue's label sets, and only on a queue with a MaxInFlight limit, so
-- only then are they bound; with pends, always. Answers whether the
-- client's sets are current (false: STALE_SETS, before any write), and
-- whether the queue has the limit, for lease_freed. It reads hooks_on in
-- the same HMGET.
local function lease_bind(pends)
  local m = redis.call('HMGET', K_meta, M_limit_inflight, M_lsets, M_hooks)
  hooks_on = m[3] == '1' -- hook_open's read, in the same call
  local limited = m[1] and true or false
  if not limited and not pends then
    return true, false
  end
  return sets_current(m[2] or false), limited
end

-- next_due is the score of the earliest scheduled job, as a string, ""
-- when none is (the sentinel's score is +inf).
local function next_due()
  local head = redis.call('ZRANGE', K_sched, '0', '0', 'WITHSCORES')
  if head[1] == SENTINEL then
    return ''
  end
  return head[2]
end

-- HAND_HOLD is how long (ms) after its due time a due time handed to a
-- claimer to wake at (claim.lua's take_wake) is left to it: a promoter
-- promotes it only then (promote.lua).
local HAND_HOLD = 2

-- Attention marks -----------------------------------------------------------
-- The namespace indexes its queues by when each next needs a promoter
-- (its earliest scheduled job) and a sweep (its earliest lease deadline,
-- retention end or dead job's age): see queue/attention.go. An index may
-- say earlier than the truth, never later. The indexes sit in another
-- slot, so a script cannot write them: when it adds a time earlier than
-- any its key held, it notes it here, answers it through reply(), and the
-- client lowers the index after it. A time not earlier than its key's head
-- needs no note: the index is at that head or before it already.

local marks = {} -- 'due', 'sweep' -> the earliest time noted
local heads = {}

-- mark lowers marks[name] to at (a number, math.huge: nothing).
local function mark(name, at)
  if at < math.huge and (not marks[name] or at < marks[name]) then
    marks[name] = at
  end
end

-- first_score answers the earliest score of a sorted set, math.huge when
-- it holds only the sentinel.
local function first_score(key)
  local r = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
  if r[1] == SENTINEL or not r[1] then
    return math.huge
  end
  return tonumber(r[2])
end

-- head_of answers the earliest score of a sorted set as this script
-- began (math.huge for none), lowered by what it noted since.
local function head_of(key)
  local h = heads[key]
  if h == nil then
    h = first_score(key)
    heads[key] = h
  end
  return h
end

-- note marks name at work_at when score (a number), about to be added to
-- key, is earlier than the key's head.
local function note(name, key, score, work_at)
  if score < head_of(key) then
    heads[key] = score
    mark(name, work_at)
  end
end

-- note_due notes a scheduled job's due score (a number) before its ZADD.
local function note_due(due)
  note('due', K_sched, due, due)
end

-- note_sweep notes score (a number), about to be added to key, one of the
-- swept sets, whose work falls due at work_at.
local function note_sweep(key, score, work_at)
  note('sweep', key, score, work_at)
end

-- The sweep hint (see "The sweep hint" in queue/attention.go): the meta
-- field sweep_hint, "<ms>|<set at ms>", says that this queue's entry in
-- the sweep index is at ms or earlier (or a mark that puts it there is on
-- its way). A sweep mark no earlier than a hint younger than SWEEP_HINT_MS
-- is left out: the entry is early enough already. A mark that goes sets
-- the hint to itself. forced (a rerun, see rerun_reply) sends the mark
-- whatever the hint says. The reclaim pass, whose park may raise the
-- entry, deletes the hint.
local function sweep_mark(at, forced)
  at = math.floor(at)
  if not forced then
    local hint, set_at = string.match(redis.call('HGET', K_meta, M_sweep_hint) or '', '^(%d+)|(%d+)$')
    if hint and now - tonumber(set_at) < SWEEP_HINT_MS and now >= tonumber(set_at) and at >= tonumber(hint) then
      return 0
    end
  end
  redis.call('HSET', K_meta, M_sweep_hint, int_str(at) .. '|' .. now_str)
  return at
end

-- reply is how a script that notes answers: { SENTINEL, due_ms, sweep_ms,
-- now_us, x }, the marks as whole ms (0: none), floored (never later).
-- The client takes the marks off and hands x on (Client.run). forced
-- sends the sweep mark whatever the queue's hint says (see sweep_mark).
local function reply(x, forced)
  local r = { SENTINEL, math.floor(marks.due or 0), marks.sweep and sweep_mark(marks.sweep, forced) or 0, now_us, x }
  if marks.wf then
    -- a workflow node's job ended: its outbox entry waits for a releaser
    -- (see wf_ended); the client marks the outbox index with it.
    if x == nil then
      r[5] = false
    end
    r[6] = math.floor(marks.wf)
  end
  return r
end

-- rerun_reply answers x as reply() does, for a rerun of a call whose first
-- run may have noted marks that the client never applied (its reply was
-- lost): it marks the current heads of the sets that run could have added
-- to, whatever they are: sched (K_sched or nil) for the due mark, the
-- sweep sets for the sweep mark, and dead (K_dead or nil) dead_age after
-- its head. A mark that is not earlier than the index changes nothing.
local function rerun_reply(x, sched, sweep, dead, dead_age)
  if sched then
    mark('due', first_score(sched))
  end
  for _, key in ipairs(sweep) do
    mark('sweep', first_score(key))
  end
  if dead then
    mark('sweep', first_score(dead) + dead_age)
  end
  return reply(x, true)
end

-- schedule puts a job that is out of every list to wait until its due
-- score (or straight into its pending list when that is now or past,
-- waking its claimers), saving f. Answers the new status.
local function schedule(id, f, score)
  local due = tonumber(score)
  f[R_run_at_ms] = math.floor(due)
  if due <= tonumber(cutoff) then
    f[R_status] = 'pending'
    f[R_run_at_ms] = now -- due already: it runs from now
    to_pending(id, f[R_labels], f[R_flow])
    save(id, f)
    flush_pending(false, true)
    return 'pending'
  end
  f[R_status] = 'scheduled'
  save(id, f)
  note_due(due)
  redis.call('ZADD', K_sched, score, id)
  return 'scheduled'
end

-- promote_due moves up to limit scheduled jobs that are due into their
-- pending lists, earliest first, and answers how many moved, waking their
-- claimers as flush_pending does with wakes and waiting_until. An id whose
-- job is no longer scheduled (a stale entry) only leaves the set.
-- direct (a table, or nil): a claim that will take the jobs it promotes
-- into K_pending itself (see claim.lua). When K_pending holds no job
-- before them, the due jobs without labels or flow key are not pushed
-- there: their ids go to direct, in order, and their records (decode's
-- tables, status "pending", not written) to direct.rec by id. With
-- direct.upto (a score after cutoff), such jobs due up to it go to direct
-- too, direct.start[id] the µs each is due at; the other jobs not yet due
-- stay where they are.
local function promote_due(limit, wakes, waiting_until, direct)
  -- with upto, members and scores alternate: split them
  local upto, ids, scores = direct and direct.upto, nil, nil
  if upto then
    local r = redis.call('ZRANGEBYSCORE', K_sched, '-inf', upto, 'WITHSCORES', 'LIMIT', '0', int_str(limit))
    ids, scores = {}, {}
    for k = 1, #r / 2 do
      ids[k], scores[k] = r[2 * k - 1], r[2 * k]
    end
  else
    ids = redis.call('ZRANGEBYSCORE', K_sched, '-inf', cutoff, 'LIMIT', '0', int_str(limit))
  end
  if #ids == 0 then
    return 0
  end
  if direct and list_len(K_pending) > 0 then
    direct = nil -- older jobs wait in the list: these go behind them, none ahead
  end
  local due, saves, gone = {}, {}, {} -- gone: the ids that leave the set
  local fs = load_many(ids) -- nil where a stale entry's job is gone: no ipairs
  local now_score = tonumber(cutoff)
  for k = 1, #ids do
    local f, id = fs[k], ids[k]
    local later = scores and tonumber(scores[k]) > now_score
    if not (f and f[R_status] == 'scheduled') then
      gone[#gone + 1] = id -- a stale entry
    elseif later and not (direct and f[R_labels] == '' and f[R_flow] == '') then
      -- not due yet, and not for this claim: it stays scheduled
    else
      due[#due + 1] = id
      gone[#gone + 1] = id
      f[R_status] = 'pending'
      if direct and f[R_labels] == '' and f[R_flow] == '' then
        direct[#direct + 1] = id
        direct.rec[id] = f
        if later then
          -- the score is "<ms>.<µs>" as a double: µs, rounded to the
          -- whole µs it was written as
          direct.start[id] = math.floor(tonumber(scores[k]) * 1000 + 0.5)
        end
      else
        to_pending(id, f[R_labels], f[R_flow]) -- all of them before the first write
        saves[#saves + 1] = id
        saves[#saves + 1] = encode(f)
      end
      emit('promoted', id, f[R_kind], 'pending', f[R_attempts])
    end
  end
  if #gone > 0 then
    redis.call('ZREM', K_sched, unpack(gone))
  end
  if #saves > 0 then
    redis.call('HSET', K_jobs, unpack(saves))
  end
  if #due > 0 then
    flush_pending(false, wakes, waiting_until)
    count(M_promoted, #due)
  end
  return #due
end

-- finish_claim forgets the retry marker of the claim token belonged to:
-- once one of its jobs is acked (or taken back), its reply has arrived or
-- no longer matters.
local function finish_claim(token)
  local base = token_base(token)
  if base then
    redis.call('HDEL', K_claims, base)
  end
end

-- lease_ending notes, for end_leases, that a batch ends the lease of job
-- id (record f) that token holds: id goes to ids, its claim's retry
-- marker to bases, and its flow key's slot is freed (lease_ended).
local function lease_ending(id, f, token, ids, bases)
  ids[#ids + 1] = id
  lease_ended(id, f)
  local base = token_base(token)
  if base then
    bases[#bases + 1] = base
  end
end

-- end_leases ends, in one command each, the leases of ids that a batch
-- ended (complete, fail), and forgets bases, the retry markers of their
-- claims (see finish_claim); limited as lease_bind answered it.
local function end_leases(ids, bases, limited)
  if #ids == 0 then
    return
  end
  redis.call('ZREM', K_leases, unpack(ids))
  lease_freed(#ids, limited)
  if #bases > 0 then
    redis.call('HDEL', K_claims, unpack(bases))
  end
end

-- end_claim ends the lease of job id (record f) that token holds, for a
-- release: a batch of one of lease_ending and end_leases, and the record
-- notes the release ("r") with the token. The caller saves f.
local function end_claim(id, f, token)
  local ids, bases = {}, {}
  lease_ending(id, f, token, ids, bases)
  end_leases(ids, bases)
  f[R_ack] = 'r' .. token
  f[R_lease_until_ms] = ''
end

-- Idempotency records ---------------------------------------------------------
-- A record is "<job id>|<expires ms>" in K_idem: it answers for its job
-- until then (a record read past its time counts as none), and it goes
-- when its job goes.

-- idem_of answers the job id and expiry of idempotency key ik, nil when
-- it has no record.
local function idem_of(ik)
  local v = redis.call('HGET', K_idem, ik)
  if not v then
    return nil
  end
  local id, exp = string.match(v, '^(.*)|(%d+)$')
  return id, tonumber(exp)
end

-- Deleting jobs -------------------------------------------------------------
-- (Scripts that call these declare K_data, K_idem and K_expiry.)

-- drop deletes a job: its record, its payload, result and notes, and the
-- idempotency record that points at it. Within A_tomb_ms of its enqueue or
-- of its end, a tombstone stays in its place until then, holding how its
-- last attempt was acked: a retried enqueue or ack that arrives after the
-- job is gone still answers what happened, and never makes it again.
local function drop(id, f)
  -- its data: payload, result, notes, artifacts, upstream, and each of its log
  -- lines (the record counts them: at most MaxLogLines)
  local lines = f[R_log] ~= '' and tonumber(string.match(f[R_log] or '', '^(%d+)|'))
  if lines then
    local gone = { id, id .. '.r', id .. '.n', id .. '.a', id .. '.u' }
    for seq = 1, lines do
      gone[#gone + 1] = id .. '.l.' .. seq
    end
    redis.call('HDEL', K_data, unpack(gone))
  else
    redis.call('HDEL', K_data, id, id .. '.r', id .. '.n', id .. '.a', id .. '.u')
  end
  local ik = f[R_idempotency_key]
  if ik ~= '' and idem_of(ik) == id then
    redis.call('HDEL', K_idem, ik)
  end
  local since = math.max(tonumber(f[R_enqueued_at_ms]) or 0, tonumber(f[R_completed_at_ms]) or 0,
    tonumber(f[R_canceled_at_ms]) or 0, tonumber(f[R_died_at_ms]) or 0)
  local left = since + tonumber(A_tomb_ms) - now
  if left > 0 then
    redis.call('HSET', K_jobs, id, '-' .. f[R_ack])
    note_sweep(K_expiry, now + left, now + left)
    redis.call('ZADD', K_expiry, now + left, id)
  else
    redis.call('HDEL', K_jobs, id)
    redis.call('ZREM', K_expiry, id)
  end
end

-- expiry_strs memoizes retire's expiry times: the retention as its
-- string -> the expiry ms as a string (string keys: a table keyed by a
-- large integer is an array as long as it in gopher-lua).
local expiry_strs = {}

-- retire keeps a job that has ended (completed or canceled) for its
-- retention, at least as long as its idempotency record, after which the
-- sweep drops it; with no retention it is dropped now. Answers whether the
-- job is kept, and then f as stored. A kept job is saved, unless saves (a
-- table) is given: then its id and record are appended to it, for one
-- HSET by the caller. With expiring (a table), the job's score and id are
-- appended to it, for one ZADD of K_expiry by the caller, instead of a
-- ZADD of its own.
local function retire(id, f, retention_ms, expiring, saves)
  local key = retention_ms -- the retention's string, for expiry_strs; nil: not memoized
  if f[R_result_ttl_ms] ~= '' then
    key = f[R_result_ttl_ms]
  end
  local ttl = tonumber(key)
  local ik = f[R_idempotency_key]
  if ik ~= '' then
    local rid, till = idem_of(ik)
    if rid == id and till - now > ttl then
      ttl, key = till - now, nil
    end
  end
  if ttl > 0 then
    local stored
    if saves then
      stored = encode(f)
      saves[#saves + 1] = id
      saves[#saves + 1] = stored
    else
      stored = save(id, f)
    end
    local at = key and expiry_strs[key]
    if not at then
      note_sweep(K_expiry, now + ttl, now + ttl)
      at = int_str(now + ttl)
      if key then
        expiry_strs[key] = at
      end
    end
    if expiring then
      expiring[#expiring + 1] = at
      expiring[#expiring + 1] = id
    else
      redis.call('ZADD', K_expiry, at, id)
    end
    return true, stored
  end
  drop(id, f)
  return false
end

-- trim_dead drops dead jobs older than max_age_ms or past max_count,
-- oldest first, at most 100 a call (the next call takes the rest).
local function trim_dead(max_count, max_age_ms)
  local budget = 100
  local old = redis.call('ZRANGEBYSCORE', K_dead, '-inf', now - max_age_ms, 'LIMIT', 0, budget)
  local excess = redis.call('ZCARD', K_dead) - 1 - #old - max_count
  if excess > 0 and #old < budget then
    local more = redis.call('ZRANGE', K_dead, 0, #old + math.min(excess, budget - #old) - 1)
    old = more
  end
  for _, id in ipairs(old) do
    redis.call('ZREM', K_dead, id)
    local f = load(id)
    if f and f[R_status] == 'dead' then
      drop(id, f)
    end
  end
  return #old
end

-- Workflows ------------------------------------------------------------------
-- (Scripts that end jobs declare K_wfout and K_data.) A workflow node's
-- job that ends (completed, dead or canceled) leaves an entry in its
-- queue's outbox, in the same script: its refs, its outcome, its result,
-- its artifacts and its last error, NUL-joined. The refs
-- ("<workflow>|<node>|<gen>", joined by ",") are its own workflow's
-- (R_workflow) and then those of the implicit workflows watching it
-- (R_watchers, see wfadopt.lua): one entry for them all. A releaser
-- (package workflow) records it in each ref's workflow, releases or
-- cancels the children, and only then acks it (wfack.lua): a crash
-- anywhere between leaves the entry, and every step is safe to run again.
-- The entry is keyed by the job's id: a rerun writes the same.

local function wf_ended(id, f, outcome)
  local refs = f[R_workflow]
  if f[R_watchers] ~= '' then
    refs = refs == '' and f[R_watchers] or refs .. ',' .. f[R_watchers]
  end
  if refs == '' then
    return
  end
  local d = redis.call('HMGET', K_data, id .. '.r', id .. '.a')
  redis.call('HSET', K_wfout, id, refs .. '\0' .. outcome .. '\0' .. (d[1] or '') .. '\0' .. (d[2] or '') ..
    '\0' .. f[R_last_error])
  mark('wf', now)
end

-- wf_rerun marks the outbox for a rerun of a call whose first run may have
-- written an entry whose mark was never applied (see rerun_reply).
local function wf_rerun()
  if redis.call('HLEN', K_wfout) > 1 then
    mark('wf', now)
  end
end

-- hook writes a job's event to the queue's hooks outbox (see KeyHooks in
-- layout.go) while the queue's meta says a webhook subscription may want
-- it: in the script that makes the change, so an event is durable as
-- soon as the change is. typ is "completed", "dead", "canceled",
-- "retried" or "cron_fired" (cron, the entry's name, for that one only);
-- status the job's after the change. The fields are store.Hook*'s. A full outbox (HOOK_MAX events, a dispatcher away) takes
-- no more: the event is counted in meta's hooks_dropped instead.
local function hook_open()
  if hooks_on == nil then
    hooks_on = redis.call('HGET', K_meta, M_hooks) == '1'
  end
  if not hooks_on then
    return false
  end
  if redis.call('XLEN', K_hookout) > HOOK_MAX then
    redis.call('HINCRBY', K_meta, M_hooks_dropped, '1')
    return false
  end
  return true
end
local function hook(typ, id, f, status, cron)
  if hook_open() then
    redis.call('XADD', K_hookout, '*', 't', typ, 'i', id, 'k', f[R_kind], 's', status, 'a', f[R_attempts] ~= '' and f[R_attempts] or '0',
      'm', now_str, 'e', typ == 'completed' and '' or f[R_last_error], 'c', cron or '')
  end
end

-- hook_wf writes the event of a workflow that ended (type "wf_ended") to
-- the hooks outbox of the queue of the node's job whose end ended it, as
-- hook does a job's: wf is the workflow's id, wf_status its status
-- ("completed", "failed" or "canceled"), ended_ms when it ended; the job's
-- id, kind, status (its outcome) and attempts go with it (f nil: the job
-- is gone, and its kind and attempts are left empty).
local function hook_wf(id, f, outcome, wf, wf_status, ended_ms)
  if hook_open() then
    redis.call('XADD', K_hookout, '*', 't', 'wf_ended', 'i', id, 'k', f and f[R_kind] or '', 's', outcome,
      'a', f and f[R_attempts] or '0', 'm', ended_ms, 'e', '', 'c', '', 'w', wf, 'x', wf_status)
  end
end

-- kill moves a job that is out of every list into the dead set, saving f.
local function kill(id, f, err, max_count, max_age_ms)
  f[R_status] = 'dead'
  f[R_died_at_ms] = now
  f[R_last_error] = err
  f[R_cancel_requested] = ''
  f[R_lease_until_ms] = ''
  save(id, f)
  note_sweep(K_dead, now, now + max_age_ms)
  redis.call('ZADD', K_dead, now, id)
  count(M_dead, 1)
  wf_ended(id, f, 'dead')
  hook('dead', id, f, 'dead')
  emit('dead', id, f[R_kind], 'dead', f[R_attempts])
  trim_dead(max_count, max_age_ms)
end

-- cancel_now ends a job that is out of every list as canceled, saving f.
local function cancel_now(id, f, request, retention_ms)
  f[R_status] = 'canceled'
  f[R_canceled_at_ms] = now
  f[R_cancel_token] = request
  f[R_cancel_requested] = ''
  f[R_lease_until_ms] = ''
  count(M_canceled, 1)
  wf_ended(id, f, 'canceled')
  hook('canceled', id, f, 'canceled')
  emit('canceled', id, f[R_kind], 'canceled', f[R_attempts])
  retire(id, f, retention_ms)
end

-- pack_job is a job as scripts answer it:
-- "<id>\0<payload>\0<result>\0<upstream>\0<artifacts>\0<record>", the
-- record last and as stored (see encode: the client spells its short forms
-- out, so a script does not), its inline payload in it and the payload
-- field then empty; upstream is a workflow node's (see wfnode.lua). Every
-- answer of a job is written here (parsePacked reads it).
local function pack_job(id, payload, result, upstream, arts, stored)
  return id .. '\0' .. payload .. '\0' .. result .. '\0' .. upstream .. '\0' .. arts .. '\0' .. stored
end

-- packed is pack_job of the job f, reading what it needs of the data
-- hash. stored, when given, is f as save answered it. with_arts fills in
-- the artifacts (the JSON object, "" for none), for an answer that stands
-- for a read of the one job (complete.lua's). (Scripts that call it
-- declare K_data.)
local function packed(id, f, stored, with_arts)
  local payload, result, upstream, arts = '', '', '', ''
  -- Only a completed job has a result (complete.lua writes it), and only
  -- a workflow's node an upstream (wfnode.lua): the others' are not read.
  -- What is read is read in one HMGET, the artifacts with it.
  if not f.p then
    local d = redis.call('HMGET', K_data, id, id .. '.r', id .. '.u', id .. '.a')
    payload, result, upstream, arts = d[1] or '', d[2] or '', d[3] or '', d[4] or ''
  elseif f[R_status] == 'completed' or f[R_workflow] ~= '' or with_arts then
    local d = redis.call('HMGET', K_data, id .. '.r', id .. '.u', id .. '.a')
    result, upstream, arts = d[1] or '', d[2] or '', d[3] or ''
  end
  if not with_arts then
    arts = ''
  end
  return pack_job(id, payload, result, upstream, arts, stored or encode(f))
end

-- A workflow's own slot (the wf_*.lua scripts, which declare K_wf) --------
-- The workflow hash: meta fields, and per node "<x>:<node>" (see wfNode*
-- in internal/store/layout.go): q its job ("<queue>|<id>"), p its parents and c its
-- children (comma-joined), r its parents not ended, f its parents dead or
-- canceled, o its outcome once recorded, u what its children receive of
-- it, g the gen its job was armed at.

-- wf_split answers the names of a comma-joined list.
local function wf_split(s)
  local t = {}
  for x in string.gmatch(s or '', '[^,]+') do
    t[#t + 1] = x
  end
  return t
end

-- wf_upstream is the upstream of a node with the given parents: a JSON
-- object, parent name -> its u field (names need no escaping: see
-- workflow.ValidateNodeName); when that would pass the workflow's upmax
-- (MaxUpstreamBytes), each parent's v field instead, without results and
-- artifacts (a fan-in of 999 parents of 1 MiB results each would make a
-- value of 1 GB).
local function wf_upstream(parents)
  local ps = wf_split(parents)
  if #ps == 0 then
    return ''
  end
  local fields = {}
  for i, p in ipairs(ps) do
    fields[i] = NODE_up .. p
  end
  local us = redis.call('HMGET', K_wf, unpack(fields))
  local size = 0
  for i = 1, #ps do
    size = size + #(us[i] or '') + #ps[i] + 4
  end
  if size > tonumber(redis.call('HGET', K_wf, WF_upmax) or '0') then
    for i, p in ipairs(ps) do
      fields[i] = NODE_brief .. p
    end
    us = redis.call('HMGET', K_wf, unpack(fields))
  end
  local parts = {}
  for i, p in ipairs(ps) do
    parts[i] = '"' .. p .. '":' .. (us[i] or 'null')
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- wf_plan appends to out what the jobs of the named nodes that have no
-- outcome yet need now, as groups of mode, node, job ("<queue>|<id>"),
-- gen, upstream (see wfnode.lua): nothing before the workflow started
-- (its jobs may not all exist yet), unless it is canceled; "abort" every
-- one of a canceled workflow; "cancel" one with a failed parent under
-- on_failure "cancel"; "release" one whose parents have all ended. A node
-- whose job existed before (external: a single job's depends_on) is
-- left alone: only its ends are recorded. With
-- rearm, each is first "rearm"ed at its gen (a retry: wfnode.lua changes
-- only a job of an older gen that ended).
local function wf_plan(names, out, rearm)
  local m = redis.call('HMGET', K_wf, WF_policy, WF_started, WF_canceled, WF_gen)
  if m[2] ~= '1' and not m[3] then
    return
  end
  for _, x in ipairs(names) do
    local v = redis.call('HMGET', K_wf, NODE_outcome .. x, NODE_job .. x, NODE_left .. x, NODE_failed .. x, NODE_gen .. x, NODE_parents .. x, NODE_external .. x)
    if not v[1] and v[2] and v[7] ~= '1' then
      local function add(mode, gen, up)
        out[#out + 1] = mode
        out[#out + 1] = x
        out[#out + 1] = v[2]
        out[#out + 1] = gen
        out[#out + 1] = up
      end
      if m[3] then
        add('abort', m[4], '')
      else
        if rearm then
          add('rearm', v[5], '')
        end
        if tonumber(v[4]) > 0 and m[1] == 'cancel' then
          add('cancel', m[4], '')
        elseif tonumber(v[3]) == 0 then
          add('release', m[4], wf_upstream(v[6]))
        end
      end
    end
  end
end

-- wf_finish notes that the workflow's last node ended: the hash expires
-- retention ms later.
-- by is the node whose end was the last recorded: the workflow.ended
-- event goes with its outbox entry's ack (see wf_record.lua). The status
-- is canceled (canceled as a whole), failed (some node dead or canceled)
-- or completed, as package workflow's Status.
local function wf_finish(retention, by)
  local status = 'completed'
  if redis.call('HEXISTS', K_wf, WF_canceled) == 1 then
    status = 'canceled'
  else
    for _, x in ipairs(wf_split(redis.call('HGET', K_wf, WF_names))) do
      if redis.call('HGET', K_wf, NODE_outcome .. x) ~= 'completed' then
        status = 'failed'
        break
      end
    end
  end
  redis.call('HSET', K_wf, WF_ended_at, now, WF_ended_by, by, WF_end_status, status)
  redis.call('PEXPIRE', K_wf, retention)
end

-- Artifacts -------------------------------------------------------------------
-- A job's artifacts are one JSON object in K_data, field '<id>.a': name ->
-- value, compact, as queue/artifacts.go encodes them (names of
-- [A-Za-z0-9._-], values run through json.Compact). ART_MAX_COUNT and
-- ART_MAX_BYTES are MaxArtifacts and MaxArtifactsBytes there (a test holds
-- them equal). (Scripts that call art_merge declare K_data.)
local ART_MAX_COUNT, ART_MAX_BYTES = 32, 1048576

-- art_skip answers the index just past the compact JSON value that starts
-- at index i of s.
local function art_skip(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then
    local j = i + 1
    while true do
      local k = string.find(s, '["\\]', j)
      if string.sub(s, k, k) == '"' then
        return k + 1
      end
      j = k + 2 -- an escape: skip the escaped byte
    end
  elseif c == '{' or c == '[' then
    local depth, j = 0, i
    while true do
      local k = string.find(s, '[%[%]{}"]', j)
      local ch = string.sub(s, k, k)
      if ch == '"' then
        j = art_skip(s, k)
      elseif ch == '{' or ch == '[' then
        depth, j = depth + 1, k + 1
      else
        depth, j = depth - 1, k + 1
        if depth == 0 then
          return j
        end
      end
    end
  end
  return string.find(s, '[,}%]]', i) -- a number, true, false or null
end

-- art_parse splits a compact JSON object of artifacts into its names and
-- their values (JSON text), in order.
local function art_parse(s)
  local names, vals = {}, {}
  local i = 2
  while string.sub(s, i, i) == '"' do
    local q = string.find(s, '"', i + 1, true) -- a name holds no quote nor escape
    local j = art_skip(s, q + 2)
    names[#names + 1] = string.sub(s, i + 1, q - 1)
    vals[#vals + 1] = string.sub(s, q + 2, j - 1)
    i = j
    if string.sub(s, i, i) == ',' then
      i = i + 1
    end
  end
  return names, vals
end

-- art_merge answers id's artifacts with those of add (a compact JSON
-- object) set over them, a name given again replacing its value; or nil
-- and -2 when they would be more than ART_MAX_COUNT, nil and -3 when the
-- object would pass ART_MAX_BYTES. It writes nothing.
local function art_merge(id, add)
  local names, vals = art_parse(redis.call('HGET', K_data, id .. '.a') or '{}')
  local at = {}
  for i, n in ipairs(names) do
    at[n] = i
  end
  local an, av = art_parse(add)
  for i, n in ipairs(an) do
    if at[n] then
      vals[at[n]] = av[i]
    else
      names[#names + 1], vals[#vals + 1] = n, av[i]
      at[n] = #names
    end
  end
  if #names > ART_MAX_COUNT then
    return nil, -2
  end
  local parts = {}
  for i, n in ipairs(names) do
    parts[i] = '"' .. n .. '":' .. vals[i]
  end
  local out = '{' .. table.concat(parts, ',') .. '}'
  if #out > ART_MAX_BYTES then
    return nil, -3
  end
  return out
end

-- register_set makes the keys of a new label set: its pending list and
-- wake stream (with their sentinels and the stream's group), and its entry
-- in K_lsets. The caller appends its id to meta's lsets. (Scripts that
-- call it declare K_lsets and the set's keys.)
local function register_set(id, labels)
  redis.call('HSET', K_lsets, id, labels)
  local key = SETS.list[id]
  if redis.call('LLEN', key) == 0 then
    redis.call('RPUSH', key, SENTINEL)
  end
  key = SETS.stream[id]
  if redis.call('XLEN', key) == 0 then
    redis.call('XADD', key, 'MAXLEN', '1', '*', 'n', '0')
  end
  redis.pcall('XGROUP', 'CREATE', key, WAKE_GROUP, '$') -- an error when it exists: kept as it is
end

-- job_labels notes a job's labels (canonical, '' for none) in labels_of,
-- set id -> labels, for add_sets. It raises, before any write, when their
-- set is not declared to this script.
local function job_labels(labels_of, labels)
  if labels == '' then
    return
  end
  local id = set_of(labels)
  if not SETS.list[id] then
    error('chronoq: the label set ' .. labels .. ' is not declared')
  end
  labels_of[id] = labels
end

-- add_sets registers the label sets declared to this script (SETS) that
-- the queue has not seen yet, and adds them to meta's lsets (current: its
-- value). labels_of maps each declared set's id to its labels: every
-- declared set is some job's. It answers { -2, labels } when a new set
-- would take the queue past max_sets, having written nothing; nil once
-- written. (Scripts that call it declare K_meta and K_lsets.)
local function add_sets(labels_of, max_sets, current)
  local registered, new_sets = 0, {}
  for _ in string.gmatch(current or '', '[^,]+') do
    registered = registered + 1
  end
  for _, id in ipairs(SETS.ids) do
    local have = redis.call('HGET', K_lsets, id)
    if not labels_of[id] then
      error('chronoq: label set ' .. id .. ' is declared for no job')
    elseif not have then
      new_sets[#new_sets + 1] = id
      if registered + #new_sets > max_sets then
        return { -2, labels_of[id] }
      end
    elseif have ~= labels_of[id] then
      error('chronoq: label sets ' .. have .. ' and ' .. labels_of[id] .. ' share an id')
    end
  end
  if #new_sets > 0 then
    local all = current or ''
    for _, id in ipairs(new_sets) do
      register_set(id, labels_of[id])
      if all == '' then
        all = id
      else
        all = all .. ',' .. id
      end
    end
    redis.call('HSET', K_meta, M_lsets, all)
  end
  return nil
end

-- member_lt reports whether member a sorts before b in byte order, as
-- Redis orders the members of equal score.
local function member_lt(a, b)
  local m = math.min(#a, #b)
  for i = 1, m do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- rank_after answers the rank in sorted set key of the first member
-- ordered after (score, id) (strict) or not before it (not strict),
-- whether or not id is a member: a page's cursor, found by binary search
-- among the members of that score.
local function rank_after(key, score, id, strict)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do -- ranks [lo, hi) hold the members of this score, by bytes
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    local after
    if strict then
      after = member_lt(id, m)
    else
      after = not member_lt(m, id)
    end
    if after then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end
