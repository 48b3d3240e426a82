package broker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSendRollbackSysFlagRefused: a plain send whose sysFlag says
// "rolled-back transaction message" is refused with MESSAGE_ILLEGAL: the
// ConsumeQueue dispatch skips such a message, so acknowledged it would
// never be delivered. The commit type is a plain message and is delivered.
func TestSendRollbackSysFlagRefused(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "RB", 4)
	ext := sendExt("RB", 1, "")
	ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransRollback))
	resp := tc.call(addr, remoting.RequestSendMessage, ext, []byte("rolled back"))
	if resp.Code != remoting.ResponseMessageIllegal || !strings.Contains(resp.Remark, "sysFlag") {
		t.Fatalf("send with the rollback sysFlag answered %d %q; want MESSAGE_ILLEGAL naming the sysFlag", resp.Code, resp.Remark)
	}
	ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransCommit))
	resp = tc.call(addr, remoting.RequestSendMessage, ext, []byte("committed"))
	if resp.Code != remoting.ResponseSuccess || resp.ExtFields["queueOffset"] != "0" {
		t.Fatalf("send with the commit sysFlag: %d %q offset %q; want success at offset 0",
			resp.Code, resp.Remark, resp.ExtFields["queueOffset"])
	}
}
