package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestAdminQueryMsgByKeyFlags: queryMsgByKey takes RocketMQ 5.3.1's
// flags, -m maxNum and -c cluster (the broker groups of that cluster
// only, an unknown cluster an error naming it), and still RocketMQ
// 5.1.4-5.3.0's -c maxNum when -c is a number. -m was refused as an
// unknown flag and -c with a cluster name as not a number.
func TestAdminQueryMsgByKeyFlags(t *testing.T) {
	f := startParity(t)
	for _, args := range [][]string{
		{"-m", "5"},
		{"-c", "DefaultCluster"},
		{"-c", "DefaultCluster", "-m", "1"},
		{"-c", "5"},
	} {
		var views []messageView
		f.js(t, &views, append([]string{"queryMsgByKey", "-t", "ParT", "-k", "pk1"}, args...)...)
		if len(views) != 1 || views[0].Body != "parity-1" {
			t.Errorf("queryMsgByKey -k pk1 %s: %+v; want the one message with key pk1", strings.Join(args, " "), views)
		}
	}
	out, err := runAdmin(t, append(f.n, "queryMsgByKey", "-t", "ParT", "-k", "pk1", "-c", "NoSuchCluster")...)
	if !errors.Is(err, errNotFound) || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Fatalf("queryMsgByKey -c NoSuchCluster: %v\n%s; want an error naming the unknown cluster", err, out)
	}
}

// TestQueryKeyWindow: without -e the store-time window has no end, as
// mqadmin's (Long.MAX_VALUE). It ended at this host's clock, so a message
// stored moments ago by a broker whose clock runs ahead was not found.
func TestQueryKeyWindow(t *testing.T) {
	begin, end := queryKeyWindow(flagValues{"beginTimestamp": int64(0), "endTimestamp": int64(0)})
	if begin.UnixMilli() != 0 || end.UnixMilli() != math.MaxInt64 {
		t.Fatalf("window without -b/-e: %d..%d ms; want 0..%d", begin.UnixMilli(), end.UnixMilli(), int64(math.MaxInt64))
	}
	_, end = queryKeyWindow(flagValues{"beginTimestamp": int64(5), "endTimestamp": int64(1700000000000)})
	if !end.Equal(time.UnixMilli(1700000000000)) {
		t.Fatalf("-e 1700000000000: end %v", end)
	}
}
