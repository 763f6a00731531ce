package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer is a log's output (or a process's stderr) that a test reads
// while other goroutines write it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String answers what was written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
