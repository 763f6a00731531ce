// Package redisproc starts local processes for the tests, the benchmark
// and the fault-injection battery: redis-server on free loopback ports
// (alone or joined into a Redis Cluster) and any other child that must die
// with its parent. Package testutil (the test suites), package
// testutil/chaos (cmd/chronoq-chaos, which is not a test) and the bench
// module all need exactly this — a port whose cluster bus port is free
// too, readiness that checks the pid (so a foreign server on the port is
// not taken for ours), signals to a whole process group, bounded kills —
// and this package is its one implementation. It imports no testing code.
//
// It also moves a cluster's hash slot from one master to another by hand,
// a few keys at a time, while clients use it (MigrateSlot), and answers
// the questions that needs: a key's slot (KeySlot), a slot's master
// (SlotOwner), the nodes and their ids (ClusterNodes, NodeID).
//
// It is meant for Linux, where every child also dies with this process
// (Pdeathsig); it builds on other Unix systems (the benchmark runs on
// macOS too), where a child outlives a parent that dies without stopping
// it.
package redisproc
