-- hookack.lua: deletes entries of a queue's hooks outbox that every
-- subscription has taken (see hook_fanout.lua); never the sentinel, so the
-- stream is never empty.
-- Keys and arguments: store.HookOutAck in internal/store/ops.go: the
-- entries' ids.
-- Returns: the number deleted.
local n = 0
for i = GROUP_START, #ARGV, GROUP do
  local sid = ARGV[i + G_sid]
  if sid ~= HOOK_SENTINEL then
    n = n + redis.call('XDEL', K_hookout, sid)
  end
end
return n
