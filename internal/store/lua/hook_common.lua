-- hook_common.lua: the definitions the event webhook scripts (hook_*.lua)
-- use; each is sent with those its body uses. Their keys are one
-- subscription's, in the slot of the namespace's hooks (see HookKeys in
-- internal/store/layout.go): subs (HASH id -> the subscription), seq (a
-- counter), ev (HASH event key -> "<attempts>|<next ms>|<job>|<body>"),
-- pend (ZSET event key -> its seq: the order events were fanned out in),
-- dead (ZSET event key -> died ms), deadev (HASH event key -> the dead
-- delivery, JSON), cur (HASH queue -> the last outbox entry fanned out).
-- clock is Redis's now in ms, plus offset_us (a test's fake clock).
local function clock(offset_us)
  local t = redis.call('TIME')
  return math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(offset_us)) / 1000)
end
-- entry splits an ev value: attempts, next ms, job, body.
local function entry(v)
  local a, n, job, body = string.match(v, '^(%d+)|(%d+)|([^|]*|[^|]*)|(.*)$')
  return tonumber(a), tonumber(n), job, body
end
