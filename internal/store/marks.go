package store

// Marks are what a script that noted attention marks answers around its
// reply (reply() in common.lua): { SENTINEL, due ms, sweep ms, seq,
// reply, wf ms }, the last when a workflow node's job ended.
type Marks struct {
	DueMs, SweepMs, Seq int64
	WFMs                int64 // a workflow node's job left an outbox entry
}

// UnwrapMarks answers the reply v wraps and its marks, or v itself and no
// marks when v is not wrapped. A wrapper whose marks are not integers is
// an error naming script.
func UnwrapMarks(script string, v any) (any, Marks, error) {
	res, ok := v.([]any)
	if !ok || len(res) < 4 {
		return v, Marks{}, nil
	}
	if s, _ := res[0].(string); s != Sentinel {
		return v, Marks{}, nil // not wrapped: a reply of its own
	}
	var m Marks
	var err error
	if m.DueMs, err = Int(script, res, 1, "due mark"); err != nil {
		return nil, m, err
	}
	if m.SweepMs, err = Int(script, res, 2, "sweep mark"); err != nil {
		return nil, m, err
	}
	if m.Seq, err = Int(script, res, 3, "mark seq"); err != nil {
		return nil, m, err
	}
	if len(res) >= 6 {
		if m.WFMs, err = Int(script, res, 5, "outbox mark"); err != nil {
			return nil, m, err
		}
	}
	if len(res) < 5 {
		return nil, m, nil // the script answered nil
	}
	return res[4], m, nil
}
