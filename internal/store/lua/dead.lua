-- dead.lua: requeues ("requeue") or deletes ("purge") the dead jobs of a
-- queue, of one kind or all (kind ""), that died at or before upto (ms),
-- one batch in dead-set order from a cursor (score and id of the last
-- entry of the previous batch); upto -1 is Redis's now, answered for the
-- next batches. Requeued jobs start their attempts again.
-- Keys and arguments: store.Dead in internal/store/ops.go.
-- Returns, through reply(): { done, count, last_score, last_id, upto }: done 1 when the sweep
--          reached its end, count the jobs changed, the cursor, and upto.
local mode, kind, batch, upto = A_mode, A_kind, tonumber(A_batch), tonumber(A_upto)
if upto and upto < 0 then
  upto = now -- the first batch: the sweep takes the jobs dead by now
end
local cscore, cid = A_cursor_score, A_cursor_id
if not batch or not upto or not tonumber(A_tomb_ms) or (mode ~= 'requeue' and mode ~= 'purge') then
  return redis.error_reply('ERR chronoq dead: malformed arguments')
end

-- kind_of answers the kind a job is filtered by: a push job (stored as
-- PUSH_KIND, its payload an envelope of its options and the kind it was
-- given) by the kind it was given, as reads and lists show it.
local function kind_of(id, f)
  if f[R_kind] ~= PUSH_KIND then
    return f[R_kind]
  end
  local ok, env = pcall(cjson.decode, f.p or redis.call('HGET', K_data, id) or '')
  if ok and type(env) == 'table' and type(env.kind) == 'string' and env.kind ~= '' then
    return env.kind
  end
  return f[R_kind]
end

if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local start = 0
if cid ~= '' then
  start = rank_after(K_dead, cscore, cid, true)
end
local r = redis.call('ZRANGE', K_dead, start, start + batch - 1, 'WITHSCORES')
local done = 0
if #r < 2 * batch then
  done = 1
end
local n, requeued = 0, 0
local last_score, last_id = '', ''
for i = 1, #r, 2 do
  local id, score = r[i], r[i + 1]
  -- The sentinel first: its score is +inf, which Lua engines need not
  -- read as a number (gopher-lua's tonumber('inf') is nil).
  if id == SENTINEL or tonumber(score) > upto then
    done = 1
    break
  end
  last_score, last_id = score, id
  local f = load(id)
  if not f or f[R_status] ~= 'dead' then
    redis.call('ZREM', K_dead, id) -- a stale entry
  elseif kind == '' or kind_of(id, f) == kind then
    redis.call('ZREM', K_dead, id)
    if mode == 'requeue' then
      f[R_status], f[R_run_at_ms], f[R_attempts] = 'pending', now, 0
      f[R_died_at_ms], f[R_token], f[R_lease_until_ms], f[R_cancel_requested] = '', '', '', ''
      to_pending(id, f[R_labels], f[R_flow])
      save(id, f)
      requeued = requeued + 1
      emit('run_now', id, f[R_kind], 'pending', f[R_attempts])
    else
      drop(id, f)
      emit('deleted', id, f[R_kind], 'dead', f[R_attempts])
    end
    n = n + 1
  end
end
count(M_requeued, requeued)
flush_pending(false, true)
publish_events()
-- A rerun after a lost reply finds nothing left to do: the tombstones
-- its first run left are marked in any case.
return rerun_reply({ done, n, last_score, last_id, upto }, nil, { K_expiry })
