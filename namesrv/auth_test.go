package namesrv

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestRegistrationAuth: with clusterAuth* set, a broker that signs with
// the cluster account registers, heartbeats and unregisters; unsigned or
// wrongly signed registration requests are refused NO_PERMISSION and
// change no route; route lookups stay open.
func TestRegistrationAuth(t *testing.T) {
	n := testServer(t, func(c *Config) {
		c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = "clusterKey1", "clusterSecret1"
	})
	addr := n.Addr().String()
	signed := testClient(t)
	signed.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: "clusterKey1", SecretKey: "clusterSecret1"}))
	b := testBroker{cluster: "C", name: "broker-a", addr: "10.0.0.1:10911", id: 0,
		topics: wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}}}
	b.register(t, signed, addr)

	forged := func(c *remoting.Client, code int16, h any) *remoting.RemotingCommand {
		return call(t, c, addr, remoting.NewRequest(code, h, nil))
	}
	unsigned := testClient(t)
	wrong := testClient(t)
	wrong.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: "clusterKey1", SecretKey: "guessed-secret"}))
	for _, c := range []struct {
		name   string
		client *remoting.Client
		code   int16
		h      any
		want   string
	}{
		{"unsigned register", unsigned, remoting.RequestRegisterBroker,
			&wire.RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: "6.6.6.6:1", ClusterName: "C"}, "REGISTER_BROKER refused: it is not signed"},
		{"wrong secret register", wrong, remoting.RequestRegisterBroker,
			&wire.RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: "6.6.6.6:1", ClusterName: "C"}, "signature check failed"},
		{"unsigned unregister", unsigned, remoting.RequestUnregisterBroker,
			&wire.UnregisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: b.addr, Cluster: "C"}, "UNREGISTER_BROKER refused"},
		{"unsigned write-permission wipe", unsigned, remoting.RequestWipeWritePermOfBroker,
			&wire.BrokerNameRequestHeader{BrokerName: "broker-a"}, "WIPE_WRITE_PERM_OF_BROKER refused"},
		{"unsigned heartbeat", unsigned, remoting.RequestBrokerHeartbeat,
			&wire.BrokerHeartbeatRequestHeader{BrokerName: "broker-a", BrokerAddr: b.addr, ClusterName: "C"}, "BROKER_HEARTBEAT refused"},
	} {
		resp := forged(c.client, c.code, c.h)
		if resp.Code != remoting.ResponseNoPermission || !strings.Contains(resp.Remark, c.want) {
			t.Errorf("%s: %d %q, want NO_PERMISSION containing %q", c.name, resp.Code, resp.Remark, c.want)
		}
	}
	// The route still names the real broker; lookups need no signature.
	r := routeOf(t, unsigned, addr, "T", remoting.DefaultVersion, true)
	if r.Code != remoting.ResponseSuccess || !strings.Contains(string(r.Body), b.addr) || strings.Contains(string(r.Body), "6.6.6.6") {
		t.Fatalf("route after forged requests: %d %s", r.Code, r.Body)
	}
	resp := forged(signed, remoting.RequestUnregisterBroker, &wire.UnregisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: b.addr, Cluster: "C"})
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("signed unregister: %d %s", resp.Code, resp.Remark)
	}
}
