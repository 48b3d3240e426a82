package broker

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// TestPopCodesNotSupported: RocketMQ 5's POP codes (200050 POP_MESSAGE,
// 200051 ACK_MESSAGE, 200053 CHANGE_MESSAGE_INVISIBLETIME, …) do not fit
// the 16 bits of a ROCKETMQ header and come in JSON headers (RocketMQ 5's
// proxy in cluster mode sends them to brokers). raftmq does not support POP
// consumption: each must be answered REQUEST_CODE_NOT_SUPPORTED naming the
// code, on a connection that stays up for the client's other requests.
func TestPopCodesNotSupported(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	nc, err := net.Dial("tcp", tc.nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	call := func(code, opaque int) *remoting.RemotingCommand {
		t.Helper()
		h := fmt.Sprintf(`{"code":%d,"language":"JAVA","version":475,"opaque":%d,"flag":0,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0"}}`, code, opaque)
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(h)))
		frame = append(frame, h...)
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(frame); err != nil {
			t.Fatalf("write code %d: %v", code, err)
		}
		var n [4]byte
		if _, err := io.ReadFull(nc, n[:]); err != nil {
			t.Fatalf("code %d: no answer on the connection: %v", code, err)
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(nc, b); err != nil {
			t.Fatalf("code %d: truncated answer: %v", code, err)
		}
		r, err := remoting.DecodeFrame(b)
		if err != nil {
			t.Fatalf("code %d: bad answer: %v", code, err)
		}
		if r.Opaque != int32(opaque) || !r.IsResponse() {
			t.Fatalf("code %d: answer opaque %d response %v; want opaque %d", code, r.Opaque, r.IsResponse(), opaque)
		}
		return r
	}
	for i, code := range []int{200050, 200051, 200151, 200052, 200053, 200054, 200055, 200056} {
		r := call(code, i+1)
		if r.Code != remoting.ResponseRequestCodeNotSupported || !strings.Contains(r.Remark, fmt.Sprint(code)) {
			t.Fatalf("code %d answered %d %q; want REQUEST_CODE_NOT_SUPPORTED naming the code", code, r.Code, r.Remark)
		}
	}
	// The same connection still serves a supported request.
	if r := call(int(remoting.RequestGetBrokerRuntimeInfo), 100); r.Code != remoting.ResponseSuccess {
		t.Fatalf("runtime info after the POP codes: %d %q", r.Code, r.Remark)
	}
}
