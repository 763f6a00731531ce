-- list.lua: one page of a queue's jobs in one status, after a cursor,
-- with the jobs themselves. Read only. Keys and arguments: specList in
-- internal/store/layout.go. status picks the set and the order:
--   scheduled  K_sched, soonest due first
--   processing K_leases, soonest lease deadline first
--   dead       K_dead, newest death first
--   completed  K_done, newest completion first
--   pending    K_pending from its right end (next to be claimed first),
--              then each label set's list (see layout.go) the same way,
--              in the order the sets were registered, then the jobs of
--              flow keys (K_fpend), by key and id
-- The cursor is the score (sets) or the position from the right end
-- (pending: counted through the lists in that order) of the last id of
-- the previous page, and that id.
-- Returns: { more, last_num, last_id, job_1, ..., job_k } with k <= limit,
--          job_i packed (see common.lua), more 1 when more ids follow, and
--          the cursor (number and id) of the last id looked at. Ids whose
--          job is no longer in that status (a pending list's stale ids)
--          are skipped, so a page may hold fewer.
-- Cost: O(log^2 N + limit) for a set (the cursor is found by binary
-- search); O(position + limit) for the pending list, as any LRANGE.
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local st, n = A_status, tonumber(A_limit)
local cnum, cid = A_cursor_num, A_cursor_id
local sets = { scheduled = K_sched, processing = K_leases, dead = K_dead, completed = K_done }
local key = sets[st] or K_pending
local mode = 'zasc'
if st == 'dead' or st == 'completed' then
  mode = 'zdesc'
elseif st == 'pending' then
  mode = 'lright'
elseif not sets[st] then
  return redis.error_reply('ERR chronoq list: no such status')
end

local out = { 0, '', '' }
local function add(id, num)
  out[2], out[3] = tostring(num), id
  local f = load(id)
  if f and f[R_status] == st then
    out[#out + 1] = packed(id, f)
  end
end

if mode == 'zasc' then
  local total = redis.call('ZCARD', key) - 1 -- less the sentinel, ranked last
  local start = 0
  if cid ~= '' then
    start = rank_after(key, cnum, cid, true)
  end
  local stop = math.min(start + n, total) - 1
  if stop >= start then
    local r = redis.call('ZRANGE', key, start, stop, 'WITHSCORES')
    for i = 1, #r, 2 do
      add(r[i], r[i + 1])
    end
  end
  if start + n < total then
    out[1] = 1
  end
elseif mode == 'zdesc' then
  local stop = redis.call('ZCARD', key) - 1 -- exclusive: the sentinel ranks last
  if cid ~= '' then
    stop = math.min(rank_after(key, cnum, cid, false), stop)
  end
  if stop > 0 then
    local from = math.max(stop - n, 0)
    local r = redis.call('ZRANGE', key, from, stop - 1, 'WITHSCORES')
    for i = #r / 2, 1, -1 do
      add(r[2 * i - 1], r[2 * i])
    end
    if from > 0 then
      out[1] = 1
    end
  end
else -- lright: positions count from the right end, less the sentinel, list after list
  local lists, lens, total = { K_pending }, {}, 0
  for _, id in ipairs(SETS.ids) do
    lists[#lists + 1] = SETS.list[id]
  end
  for i, key in ipairs(lists) do
    lens[i] = list_len(key)
    total = total + lens[i]
  end
  local listed = total -- positions past the lists are K_fpend's, by rank (its sentinel ranks 0)
  total = total + math.max(redis.call('ZCARD', K_fpend) - 1, 0)
  local start = 0
  if cid ~= '' then
    local off, found = 0, false
    for i, key in ipairs(lists) do
      local left = tonumber(cnum) + 1002 - off
      if left > 0 then
        local idx = redis.call('LPOS', key, cid, 'RANK', -1, 'MAXLEN', left)
        if idx then
          start, found = off + lens[i] - idx, true
          break
        end
      end
      off = off + lens[i]
    end
    local f = not found and load(cid)
    if f and f[R_flow] ~= '' then
      local r = redis.call('ZRANK', K_fpend, f[R_flow] .. '\0' .. cid)
      if r then
        start = listed + r
      end
    end
    -- else the cursor id has left the lists: start again at the right end
  end
  local off = 0
  for i, key in ipairs(lists) do
    local s0 = start - off -- the first position of the page in this list
    if s0 < lens[i] and s0 + n > 0 then
      s0 = math.max(s0, 0)
      local want = start + n - off - s0 -- positions of the page from s0 on
      if want > 0 then
        local r = redis.call('LRANGE', key, -(s0 + want + 1), -(s0 + 2))
        local k = #r
        for j = k, 1, -1 do
          add(r[j], off + s0 + (k - j))
        end
      end
    end
    off = off + lens[i]
  end
  local s0 = math.max(start - listed, 0)
  if start + n > listed and s0 < total - listed then
    local r = redis.call('ZRANGE', K_fpend, s0 + 1, start + n - listed)
    for j, m in ipairs(r) do
      add(string.sub(m, string.find(m, '\0', 1, true) + 1), listed + s0 + j - 1)
    end
  end
  if start + n < total then
    out[1] = 1
  end
end
return out
