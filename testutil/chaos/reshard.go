package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// Bounds of the slot migrations.
const (
	migrateLegTimeout = 2 * time.Minute // one move of the slot, there or back
	maxMigrateRounds  = 1000
)

// migrateSlots moves the first queue's slot to another master (each of
// the others in turn) and back, a round trip about every MigrateEvery,
// until ctx ends. A round under way is finished, so the slot ends on the
// master it started on; each move is bounded on its own.
func (h *harness) migrateSlots(ctx context.Context) {
	q := h.queues[0]
	slot := h.qslot[q]
	for round := 0; round < maxMigrateRounds && sleep(ctx, h.rand(h.sc.MigrateEvery)); round++ {
		nodes, err := h.cluster.Topology()
		if err != nil {
			h.problem("slot migration: %v", err)
			return
		}
		home, ok := MasterOf(nodes, slot)
		if !ok {
			h.problem("slot migration: no master serves slot %d", slot)
			return
		}
		var others []string
		for _, n := range nodes {
			if n.Master && !n.Failed && n.ID != home.ID {
				others = append(others, n.Addr)
			}
		}
		if len(others) == 0 {
			h.problem("slot migration: no other master")
			return
		}
		away := others[round%len(others)]
		if !h.migrateLeg(q, slot, home.Addr, away) || !h.migrateLeg(q, slot, away, home.Addr) {
			return
		}
	}
}

// migrateLeg moves slot from one master to another, and records the move
// as a fault on everyone. A failed move is a problem of the harness (and
// ends the migrations): it is tried once more when it left the slot open
// for another reason than a key on both sides.
func (h *harness) migrateLeg(q string, slot int, from, to string) bool {
	ctx, cancel := context.WithTimeout(h.runCtx, migrateLegTimeout)
	defer cancel()
	t0 := time.Now()
	var moved, steps int
	o := redisproc.MigrateOptions{Slot: slot, From: from, To: to, KeysPerStep: h.sc.MigrateKeys, Pause: h.sc.MigratePause,
		OnStep: func(n int) { moved, steps = n, steps+1 }}
	err := redisproc.MigrateSlot(ctx, o)
	if errors.Is(err, redisproc.ErrSlotOpen) && !errors.Is(err, redisproc.ErrKeyConflict) && ctx.Err() == nil {
		h.problem("%v; trying to finish the move", err)
		base := moved
		o.OnStep = func(n int) { moved, steps = base+n, steps+1 }
		err = redisproc.MigrateSlot(ctx, o)
	}
	note := fmt.Sprintf("%s (slot %d) %s → %s, %d keys in %d steps", q, slot, from, to, moved, steps)
	h.fault(Fault{Kind: FaultSlotMigration, Start: t0.UnixNano(), End: time.Now().UnixNano(), Note: note})
	if err != nil {
		h.problem("slot migration %s: %v", note, err)
		return false
	}
	return true
}
