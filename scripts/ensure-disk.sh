#!/usr/bin/env bash
# Makes sure the disk has room for a whole test run before it starts: the
# race-instrumented builds go to Go's build cache, and every test's
# redis-server (and each node of the local Redis Cluster) works in a
# temporary directory. On a full disk those fail one by one, as "no space
# left on device" spread over dozens of tests, so this checks first.
#
# When the build cache's disk is short, the cache is emptied (it is only a
# cache: a build fills it again with what it needs) and the check is made
# again. It fails, naming the directory and what it has, when there is still
# too little room. CHRONOQ_MIN_FREE_MB sets the room needed (default 3072).
set -euo pipefail
need_mb=${CHRONOQ_MIN_FREE_MB:-3072}
go=${GO:-go}

free_mb() { df -Pm "$1" | awk 'NR == 2 { print $4 }'; }

cache=$("$go" env GOCACHE)
mkdir -p "$cache"
tmp=${TMPDIR:-/tmp}

for dir in "$cache" "$tmp"; do
  have=$(free_mb "$dir")
  [ "$have" -ge "$need_mb" ] && continue
  if [ "$(df -P "$dir" | awk 'NR == 2 { print $1 }')" = "$(df -P "$cache" | awk 'NR == 2 { print $1 }')" ]; then
    size=$(du -sm "$cache" 2>/dev/null | awk '{ print $1 }')
    echo "ensure-disk: ${have} MB free for $dir, under ${need_mb} MB; emptying Go's build cache ($cache, ${size} MB)" >&2
    "$go" clean -cache -fuzzcache
    have=$(free_mb "$dir")
  fi
  if [ "$have" -lt "$need_mb" ]; then
    echo "ensure-disk: ${have} MB free for $dir; the tests need about ${need_mb} MB (builds and each test's redis-server directory). Free some room, or set TMPDIR or GOCACHE to a larger disk." >&2
    exit 1
  fi
done
