package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/store"
)

// The due index: every entry that fires has a cursor, the first of its
// ticks that no instance has handled yet (enqueued, or let pass as missed
// or overlapping), in the sorted set <ns>:{<ns>:cron}:due. A scheduler
// pass asks Redis for the entries whose cursor has come (cron_due.lua) and
// moves their cursors past the ticks it handled (cron_advance.lua): it reads
// nothing of the entries that are not due, so its cost does not grow
// with their number.
//
// The cursor is written with the entry: Put sets it to the first tick
// after the change (none while paused) in the script that writes the
// settings and a new version (cron_put.lua), Delete removes it in the MULTI
// that removes the entry. So a change made on any instance is in the index the moment
// it is stored; no scheduler keeps a copy of the entries to refresh. A
// scheduler moves a cursor only while the entry's version is the one it
// planned from, so a tick handled under old settings never moves the
// cursor of new ones.
//
// Entries written without an index (by a chronoq from before it) are
// found by comparing the number of entries with the number of versions,
// two O(1) reads every pass, and indexed by repair, a few hundred entries
// a command.

// The scripts are the engine's (internal/store/lua/cron_*.lua, declared
// as store.Cron* in internal/store/ops.go), run through the queue
// client's engine.

// repairChunk is how many entries one command of repair reads or writes.
const repairChunk = 500

// cursorAfter is the cursor of settings changed at since: their first
// tick after it; zero when none comes (paused, or never fires again).
func cursorAfter(e Entry, sched *Schedule, since time.Time) time.Time {
	if e.Paused {
		return time.Time{}
	}
	return sched.Next(since)
}

// writeEntry queues, on p (a MULTI), the writes of settings raw with
// version and their cursor.
func (s *Store) writeEntry(ctx context.Context, p redis.Pipeliner, name, raw string, version int64, cursor time.Time) {
	p.HSet(ctx, entriesKey(s.ns), name, raw)
	p.HSet(ctx, versionsKey(s.ns), name, version)
	if cursor.IsZero() {
		p.ZRem(ctx, dueKey(s.ns), name)
	} else {
		p.ZAdd(ctx, dueKey(s.ns), redis.Z{Score: float64(cursor.UnixMilli()), Member: name})
	}
}

// dueEntry is an entry whose cursor has come, as cron_due.lua read it.
type dueEntry struct {
	name    string
	cursor  time.Time
	version string // "" when the entry has none (not indexed yet)
	raw     string // the stored JSON; "" when the entry is gone
}

// dueRead is what cron_due.lua answers.
type dueRead struct {
	// now is Redis's now when the script ran.
	now time.Time
	due []dueEntry
	// next is the first cursor after now; zero when none.
	next time.Time
	// entries and versions count the entries and their versions: they
	// differ when entries lack an index (see repair).
	entries, versions int64
}

// readDue runs cron_due.lua: the entries whose cursor Redis's clock has
// reached, at most limit of them, earliest first. It updates the
// estimate of Redis's clock.
func (s *Store) readDue(ctx context.Context, limit int) (dueRead, error) {
	t0 := s.rc.clock.Now()
	res, err := store.CallGlobal(ctx, s.eng, store.CronDue, []string{entriesKey(s.ns), versionsKey(s.ns), dueKey(s.ns)},
		&store.CronDueArgs{OffsetUs: s.rc.offsetArg(), Limit: limit})
	t1 := s.rc.clock.Now()
	if err != nil {
		return dueRead{}, redisErr("read the due entries", err)
	}
	if res.NowUs <= 0 {
		return dueRead{}, fmt.Errorf("cron: read the due entries: Redis's time %d", res.NowUs)
	}
	if len(res.Rows)%4 != 0 {
		return dueRead{}, fmt.Errorf("cron: read the due entries: %w",
			&store.ReplyError{Script: "cron_due", Field: "rows", Reply: res.Rows, Want: "four values a due entry"})
	}
	s.rc.observe(res.NowUs, t0, t1)
	out := dueRead{now: s.rc.at(res.NowUs), entries: res.Entries, versions: res.Versions}
	if ms, err := strconv.ParseInt(res.Next, 10, 64); err == nil {
		out.next = time.UnixMilli(ms).UTC()
	}
	for i := 0; i < len(res.Rows); i += 4 {
		d, err := dueRow(res.Rows[i : i+4])
		if err != nil {
			return dueRead{}, fmt.Errorf("cron: read the due entries: %w", err)
		}
		if d.cursor.After(out.now) { // only under a fake clock (see redisClock.at)
			if out.next.IsZero() || d.cursor.Before(out.next) {
				out.next = d.cursor
			}
			continue
		}
		out.due = append(out.due, d)
	}
	return out, nil
}

// dueRow reads one due entry of cron_due.lua's reply: name, cursor,
// version, JSON.
func dueRow(row []any) (dueEntry, error) {
	var vals [4]string
	for i, field := range []string{"name", "cursor", "version", "json"} {
		v, err := store.Str("cron_due", row, i, field)
		if err != nil {
			return dueEntry{}, err
		}
		vals[i] = v
	}
	ms, err := strconv.ParseInt(vals[1], 10, 64)
	if err != nil {
		return dueEntry{}, fmt.Errorf("cursor %q of %q", vals[1], vals[0])
	}
	return dueEntry{name: vals[0], cursor: time.UnixMilli(ms).UTC(), version: vals[2], raw: vals[3]}, nil
}

// advanced is a cursor to move: the entry's, planned from version, past
// the ticks handled up to through.
type advanced struct {
	name, version string
	// through is the latest instant the handled ticks reach (the last
	// tick enqueued, or the cut-off of missed ticks let pass): cron_advance.lua
	// refuses the move while Redis's clock has not reached it.
	through time.Time
	cursor  time.Time // zero: the entry never fires again
}

// advance runs cron_advance.lua for moves, in one call.
func (s *Store) advance(ctx context.Context, moves []advanced) error {
	if len(moves) == 0 {
		return nil
	}
	p := store.CronAdvanceArgs{OffsetUs: s.rc.offsetArg(), Moves: make([]store.CronAdvanceItem, 0, len(moves))}
	for _, m := range moves {
		c := ""
		if !m.cursor.IsZero() {
			c = strconv.FormatInt(m.cursor.UnixMilli(), 10)
		}
		p.Moves = append(p.Moves, store.CronAdvanceItem{Name: m.name, Version: m.version, ThroughMs: m.through.UnixMilli(), Cursor: c})
	}
	if _, err := store.CallGlobal(ctx, s.eng, store.CronAdvance, []string{versionsKey(s.ns), dueKey(s.ns)}, &p); err != nil {
		return redisErr("advance the cursors", err)
	}
	return nil
}

// repair indexes the entries that have no version (written by a chronoq
// from before the due index) and drops the versions and cursors of
// entries that are gone; it answers how many it repaired. It reads the
// entries and versions with HSCAN, each command bounded by repairChunk;
// run when their counts differ, it costs O(entries) once.
//
// An entry indexed here resumes after the later of its last change and
// its last recorded tick, as a restarted scheduler resumed it before the
// index existed: ticks from there on are missed or on time by the usual
// rules.
func (s *Store) repair(ctx context.Context) (int, error) {
	n, err := s.scanRepair(ctx, entriesKey(s.ns), s.indexUnversioned)
	if err != nil {
		return n, err
	}
	m, err := s.scanRepair(ctx, versionsKey(s.ns), s.dropOrphans)
	return n + m, err
}

// scanRepair reads the hash key with HSCAN, repairChunk fields a command,
// and has step repair each chunk (its fields and values, as HSCAN
// answers them); it answers how many were repaired.
func (s *Store) scanRepair(ctx context.Context, key string, step func(context.Context, []string) (int, error)) (int, error) {
	n := 0
	for cur := uint64(0); ; {
		kv, next, err := s.rdb.HScan(ctx, key, cur, "", repairChunk).Result()
		if err != nil {
			return n, redisErr("repair the index", err)
		}
		r, err := step(ctx, kv)
		n += r
		if err != nil {
			return n, err
		}
		if cur = next; cur == 0 {
			return n, nil
		}
	}
}

// indexUnversioned indexes the entries of kv (names and stored JSON)
// that have no version.
func (s *Store) indexUnversioned(ctx context.Context, kv []string) (int, error) {
	names := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		names = append(names, kv[i])
	}
	if len(names) == 0 {
		return 0, nil
	}
	vers, err := s.rdb.HMGet(ctx, versionsKey(s.ns), names...).Result()
	if err != nil {
		return 0, redisErr("repair the index", err)
	}
	var missing []int
	for i, v := range vers {
		if v == nil {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	todo := make([]string, len(missing))
	for j, i := range missing {
		todo[j] = names[i]
	}
	runs, err := s.lastRuns(ctx, todo)
	if err != nil {
		return 0, err
	}
	items := make([]store.CronRepairItem, 0, len(todo))
	for j, i := range missing {
		items = append(items, store.CronRepairItem{Name: names[i], Cursor: legacyCursor(kv[2*i+1], runs[j])})
	}
	return s.runRepair(ctx, items)
}

// dropOrphans drops the versions and cursors of the names of kv (names
// and versions) whose entry is gone.
func (s *Store) dropOrphans(ctx context.Context, kv []string) (int, error) {
	if len(kv) < 2 {
		return 0, nil
	}
	pipe := s.rdb.Pipeline()
	var names []string
	var exists []*redis.BoolCmd
	for i := 0; i+1 < len(kv); i += 2 {
		names = append(names, kv[i])
		exists = append(exists, pipe.HExists(ctx, entriesKey(s.ns), kv[i]))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, redisErr("repair the index", err)
	}
	var items []store.CronRepairItem
	for i, e := range exists {
		if !e.Val() {
			items = append(items, store.CronRepairItem{Name: names[i]})
		}
	}
	if len(items) == 0 {
		return 0, nil
	}
	return s.runRepair(ctx, items)
}

// runRepair runs cron_repair.lua for items; it answers how many it
// repaired.
func (s *Store) runRepair(ctx context.Context, items []store.CronRepairItem) (int, error) {
	res, err := store.CallGlobal(ctx, s.eng, store.CronRepair, []string{entriesKey(s.ns), versionsKey(s.ns), dueKey(s.ns), seqKey(s.ns)},
		&store.CronRepairArgs{Entries: items})
	if err != nil {
		return 0, redisErr("repair the index", err)
	}
	return int(res.Code), nil
}

// legacyCursor is the cursor of an entry stored without an index: the
// first tick after its last change and its last recorded tick; "" when
// it has none (paused, never fires again, or unreadable).
func legacyCursor(raw string, run lastRun) string {
	st, err := decodeStored(raw)
	if err != nil {
		return ""
	}
	sched, err := Parse(st.Schedule, st.Timezone)
	if err != nil {
		return ""
	}
	from := time.UnixMilli(st.UpdatedAtMs)
	if last := time.UnixMilli(run.tickMs); run.tickMs > 0 && last.After(from) {
		from = last
	}
	c := cursorAfter(st.Entry, sched, from)
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.UnixMilli(), 10)
}

// decodeDue reads the settings of a due entry; ok is false when it has
// none to run: gone, or not indexed (repair will).
func decodeDue(d dueEntry) (st stored, sched *Schedule, ok bool, err error) {
	if d.raw == "" || d.version == "" {
		return stored{}, nil, false, nil
	}
	if err := json.Unmarshal([]byte(d.raw), &st); err != nil {
		return stored{}, nil, false, fmt.Errorf("cron: stored entry: %w", err)
	}
	sched, err = Parse(st.Schedule, st.Timezone)
	if err != nil {
		return stored{}, nil, false, err
	}
	return st, sched, true, nil
}
