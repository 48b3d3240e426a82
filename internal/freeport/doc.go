// Package freeport hands out loopback ports for clusters a process starts
// itself: the in-process test clusters, the real-process chaos cluster and
// `raftmq failover`. It is the one allocator they share, so two callers in
// one process never get overlapping ports.
//
// Ports come from a band below Linux's default ephemeral range
// (ip_local_port_range 32768-60999). A port the kernel picks for ":0" lies
// in that range, and so does the local port of every outgoing connection:
// between the check here and the caller's bind, a client connection (the
// official RocketMQ client opens many) could take it, and the node would
// fail with "address already in use" — most likely a killed node
// restarting on its old ports. Below the range only another listener can
// take one.
//
// # Files
//
//   - freeport.go: Block (n consecutive ports), Port (one port mid-slot),
//     Free.
package freeport
