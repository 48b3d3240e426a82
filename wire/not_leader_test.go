package wire

import "testing"

func TestNotLeaderRemark(t *testing.T) {
	for _, tc := range []struct {
		remark string
		want   bool
	}{
		{NotLeaderRemark(""), true},
		{NotLeaderRemark("127.0.0.1:10911"), true},
		{"addMember: " + NotLeaderRemark("127.0.0.1:10911"), true},
		{"disk full: commit log 95% used", false},
		{"store is shutting down", false},
		{"", false},
	} {
		if got := IsNotLeaderRemark(tc.remark); got != tc.want {
			t.Errorf("IsNotLeaderRemark(%q) = %v, want %v", tc.remark, got, tc.want)
		}
	}
	if r := NotLeaderRemark(""); r != "not leader; leader is unknown (election in progress)" {
		t.Errorf("remark while no leader is known: %q", r)
	}
}
