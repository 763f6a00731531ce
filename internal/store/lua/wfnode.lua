-- wfnode.lua: moves workflow node jobs of one queue as a releaser (package
-- workflow) decided in the workflow's slot, each only when it still
-- holds, so that a step run twice, late, or by two releasers at once
-- changes nothing more than once. Per job: mode, id, gen, upstream.
--   release: waiting -> pending (scheduled when its run-at is ahead),
--            storing upstream; only while the job's gen <= gen
--   cancel:  waiting -> canceled (a parent failed under on_failure
--            "cancel"); only while its gen <= gen
--   abort:   the workflow is canceled: waiting, scheduled, pending ->
--            canceled, processing -> cancel requested; only while its
--            gen <= gen
--   rearm:   a retry: dead or canceled -> waiting at gen, attempts from 0;
--            only while its gen < gen
-- A job that ends here as canceled leaves its outbox entry (wf_ended).
-- Keys and arguments: store.WFNode in internal/store/ops.go.
-- Returns, through reply(): { code_1, status_1, ... }: code 1 done, 0
--          not now (status is the job's), -1 no such job.
local retention, tomb, n = tonumber(A_retention_ms), tonumber(A_tomb_ms), tonumber(A_n)
if not retention or not tomb or not n then
  return redis.error_reply('ERR chronoq wfnode: malformed arguments')
end
local modes = { release = true, cancel = true, abort = true, rearm = true }
local acts = {}
for i = 0, n - 1 do
  local b = GROUP_START + i * GROUP
  local a = { mode = ARGV[b + G_mode], id = ARGV[b + G_id], gen = tonumber(ARGV[b + G_gen]), up = ARGV[b + G_upstream] }
  if not modes[a.mode] or not a.gen then
    return redis.error_reply('ERR chronoq wfnode: malformed action ' .. i)
  end
  acts[#acts + 1] = a
end

if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local out = {}
for _, a in ipairs(acts) do
  local f = load(a.id)
  local code, status = -1, ''
  if f then
    code, status = 0, f[R_status]
    local wf, g = string.match(f[R_workflow], '^(.*)|(%d+)$')
    g = tonumber(g)
    if not g then
      code = 0 -- not a workflow node's job
    elseif a.mode == 'release' then
      if status == 'waiting' and g <= a.gen then
        if a.up ~= '' then
          redis.call('HSET', K_data, a.id .. '.u', a.up)
        end
        status = schedule(a.id, f, f[R_run_at_ms]) -- onto its label set's list, waking its claimers
        emit('ready', a.id, f[R_kind], status, f[R_attempts])
        code = 1
      end
    elseif a.mode == 'cancel' or a.mode == 'abort' then
      local can = status == 'waiting' or a.mode == 'abort' and (status == 'scheduled' or status == 'pending')
      if g <= a.gen and can then
        if status == 'scheduled' then
          redis.call('ZREM', K_sched, a.id)
        elseif status == 'pending' then
          left_pending(a.id, f)
        end
        cancel_now(a.id, f, 'workflow', A_retention_ms)
        status, code = 'canceled', 1
      elseif g <= a.gen and a.mode == 'abort' and status == 'processing' then
        if f[R_cancel_requested] ~= '1' then
          f[R_cancel_requested] = '1'
          save(a.id, f)
        end
        code = 1
      end
    elseif a.mode == 'rearm' then
      if (status == 'dead' or status == 'canceled') and g < a.gen then
        if status == 'dead' then
          redis.call('ZREM', K_dead, a.id)
        end
        redis.call('ZREM', K_expiry, a.id)
        redis.call('HDEL', K_data, a.id .. '.r', a.id .. '.u')
        f[R_status], f[R_attempts], f[R_run_at_ms] = 'waiting', '0', now_str
        f[R_died_at_ms], f[R_canceled_at_ms], f[R_completed_at_ms] = '', '', ''
        f[R_token], f[R_lease_until_ms], f[R_cancel_requested], f[R_cancel_token] = '', '', '', ''
        f[R_workflow] = wf .. '|' .. int_str(a.gen)
        save(a.id, f)
        emit('rearmed', a.id, f[R_kind], 'waiting', '0')
        status, code = 'waiting', 1
      end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = status
end
publish_events()
return reply(out)
