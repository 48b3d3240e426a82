package main

import "errors"

// Sentinel errors of `raftmq admin`. main prints them and exits 1; tests
// use errors.Is.
var (
	// errAdminUsage is a missing or invalid flag (-n, -t, -s format, ...).
	errAdminUsage = errors.New("admin: invalid usage")
	// errUnreachable is a name server or broker that did not answer; the
	// message names the address and what to check.
	errUnreachable = errors.New("admin: unreachable")
	// errNotFound is a broker group, member or message the cluster does not
	// know.
	errNotFound = errors.New("admin: not found")
	// errRefused is a request the server refused for what it asks, not
	// for how it was written: a membership change that would lose the
	// quorum or conflicts with the configuration.
	errRefused = errors.New("admin: refused")
	// errTransferFailed is a leadership transfer that did not complete.
	errTransferFailed = errors.New("admin: leadership transfer failed")
)
