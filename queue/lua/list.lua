-- list.lua: one page of the ids in a queue's sorted set or list, after a
-- cursor. Read only; the caller fetches the job hashes with a pipeline.
-- KEYS[1] -> the set or list: <prefix>scheduled or <prefix>dead (ZSET),
--            <prefix>pending, <prefix>processing or <prefix>completed (LIST)
-- ARGV[1..4] -> common
-- ARGV[5] -> mode: "zasc" (ZSET, lowest score first), "zdesc" (ZSET,
--            highest first), "lright" (LIST from the right end: next to be
--            claimed first), "lleft" (LIST from the left end: newest first)
-- ARGV[6] -> page size n
-- ARGV[7] -> cursor number: the score (ZSET) or the position from the
--            scan end (LIST) of the last id of the previous page
-- ARGV[8] -> cursor id: the last id of the previous page ("" on the first)
-- Returns: { more, id_1, num_1, ..., id_k, num_k } with k <= n, num_i the
--          id's score or position (the cursor of a page ending there), and
--          more 1 when more ids follow.
-- Cost: O(log^2 N + n) for a ZSET (the cursor is found by binary search);
-- O(position + n) for a LIST, as any LRANGE.
local key, mode, n = KEYS[1], ARGV[5], tonumber(ARGV[6])
local cnum, cid = ARGV[7], ARGV[8]

-- lt compares byte by byte, as Redis orders members of equal score (Lua's
-- own < follows the server's locale).
local function lt(a, b)
  local m = math.min(#a, #b)
  for i = 1, m do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- rank_after answers the rank of the first member ordered after (score, id)
-- (strict) or not before it (not strict), whether or not id is a member.
local function rank_after(score, id, strict)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do -- ranks [lo, hi) hold the members of this score, by bytes
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    local after
    if strict then
      after = lt(id, m)
    else
      after = not lt(m, id)
    end
    if after then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

local out = { 0 }
if mode == 'zasc' then
  local start = 0
  if cid ~= '' then
    start = rank_after(cnum, cid, true)
  end
  local r = redis.call('ZRANGE', key, start, start + n, 'WITHSCORES')
  for i = 1, math.min(#r, 2 * n), 2 do
    out[#out + 1] = r[i]
    out[#out + 1] = r[i + 1]
  end
  if #r > 2 * n then
    out[1] = 1
  end
elseif mode == 'zdesc' then
  local stop = redis.call('ZCARD', key) -- exclusive
  if cid ~= '' then
    stop = rank_after(cnum, cid, false)
  end
  if stop > 0 then
    local from = math.max(stop - n - 1, 0)
    local r = redis.call('ZRANGE', key, from, stop - 1, 'WITHSCORES')
    local k = #r / 2
    for i = k, math.max(k - n + 1, 1), -1 do
      out[#out + 1] = r[2 * i - 1]
      out[#out + 1] = r[2 * i]
    end
    if k > n then
      out[1] = 1
    end
  end
elseif mode == 'lright' then
  -- Positions count from the right end, where ids leave (claims, completes).
  -- Ids enter at the left, so a cursor id keeps or lowers its position,
  -- except for ids pushed back to the right end (releases, reclaims): the
  -- search allows for 1000 of those.
  local start = 0
  if cid ~= '' then
    local idx = redis.call('LPOS', key, cid, 'RANK', -1, 'MAXLEN', tonumber(cnum) + 1001)
    if idx then
      start = redis.call('LLEN', key) - idx
    end
    -- else the cursor id has left the list: start again at the right end
    -- (ids taken from that end went before it: nothing is missed)
  end
  local r = redis.call('LRANGE', key, -(start + n + 1), -(start + 1))
  local k = #r
  for i = k, math.max(k - n + 1, 1), -1 do
    out[#out + 1] = r[i]
    out[#out + 1] = start + (k - i)
  end
  if k > n then
    out[1] = 1
  end
else -- lleft
  local start = 0
  if cid ~= '' then
    local idx = redis.call('LPOS', key, cid)
    if not idx then
      -- trimmed off the capped end: everything after it went first
      return out
    end
    start = idx + 1
  end
  local r = redis.call('LRANGE', key, start, start + n)
  for i = 1, math.min(#r, n) do
    out[#out + 1] = r[i]
    out[#out + 1] = start + i - 1
  end
  if #r > n then
    out[1] = 1
  end
end
return out
