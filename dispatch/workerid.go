package dispatch

import (
	"cmp"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/chronoq/chronoq/registry"
)

// workerSeq numbers the workers the dispatchers of this process start.
var workerSeq atomic.Int64

// WorkerID is the worker registry id (package registry) of a new worker
// serving push queue q: "dispatch-<host>-<pid>-<queue>-<n>", n counting
// the workers started in this process from 1 (a queue whose concurrency
// changes gets a new worker, so a new n). The host is cut, and its bytes
// a worker id cannot hold made '-', so that the id is valid; the process
// id and n keep it unique among the dispatchers of one host.
func WorkerID(q string) string {
	host, _ := os.Hostname()
	suffix := "-" + strconv.Itoa(os.Getpid()) + "-" + registry.SanitizeID(q, 0) + "-" + strconv.FormatInt(workerSeq.Add(1), 10)
	const prefix = "dispatch-"
	return prefix + cmp.Or(registry.SanitizeID(host, len(prefix)+len(suffix)), "host") + suffix
}
