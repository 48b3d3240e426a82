package broker

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestCreateTopicAnsweredAfterRegistration: UPDATE_AND_CREATE_TOPIC is
// answered once the name server routes the topic, as RocketMQ answers it
// after registerIncrementBrokerData: a client that creates a topic and
// subscribes or sends at once must find its route.
func TestCreateTopicAnsweredAfterRegistration(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		// Only the topic change itself may register it.
		c.RegisterNameServerPeriod = time.Hour
		c.TopicChangeCheckInterval = time.Hour
	})
	addr := tc.nodes[0].Addr()
	tc.waitRoute("TBW102") // the start-up round has ended
	for _, topic := range []string{"RegNowA", "RegNowB", "RegNowC"} {
		if resp := tc.tryCreateTopic(addr, topic, 4); resp.Code != 0 {
			t.Fatalf("create %s: %d %s", topic, resp.Code, resp.Remark)
		}
		rd := tc.ns.Routes().PickupTopicRouteData(topic)
		if rd == nil || len(rd.BrokerDatas) == 0 || rd.BrokerDatas[0].BrokerAddrs[0] == "" {
			t.Fatalf("create %s answered before the name server routes it: %+v", topic, rd)
		}
	}
}

// TestCreateTopicAnsweredWithAHungNameServer: a name server that accepts
// the registration and never answers holds the answer to a topic change
// for at most registerNowMaxWait, not registerBrokerTimeoutMills: clients
// ask with a shorter timeout (the SDK 3 s, mqadmin 5 s) and would report a
// failure for a topic that was created.
func TestCreateTopicAnsweredWithAHungNameServer(t *testing.T) {
	t.Parallel()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Close() })
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			go func() {
				b := make([]byte, 4096)
				for {
					if _, err := conn.Read(b); err != nil {
						return
					}
				}
			}()
		}
	}()
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.NamesrvAddr += ";" + hung.Addr().String()
		c.RegisterNameServerPeriod = time.Hour
		c.TopicChangeCheckInterval = time.Hour
		// Every round waits this long for the hung name server, and each
		// topic's route below waits for a round. 4 s, not the default 6 s,
		// still outlasts the 3 s the client waits for its answer.
		c.RegisterBrokerTimeoutMills = 4 * time.Second
	})
	tc.waitRoute("TBW102")
	for i := range 2 {
		topic := "RegHung" + strconv.Itoa(i)
		req := remoting.NewRequest(remoting.RequestUpdateAndCreateTopic, nil, nil)
		for k, v := range map[string]string{"topic": topic, "defaultTopic": wire.TopicAutoCreate, "readQueueNums": "4",
			"writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"} {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // the SDK's request timeout
		resp, err := tc.client.InvokeSync(ctx, tc.nodes[0].Addr(), req)
		cancel()
		if err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("create %s with a hung name server: %v %+v", topic, err, resp)
		}
		tc.waitRoute(topic)
	}
}

// TestAutoCreatedTopicAnsweredAfterRegistration: a send that creates its
// topic (autoCreateTopicEnable) is answered once the name server routes
// the topic, as RocketMQ registers a topic a send created before it
// answers: a client that sends to a new topic and then subscribes finds
// its route.
func TestAutoCreatedTopicAnsweredAfterRegistration(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.RegisterNameServerPeriod = time.Hour
		c.TopicChangeCheckInterval = time.Hour
	})
	addr := tc.nodes[0].Addr()
	tc.waitRoute("TBW102")
	for _, topic := range []string{"AutoNowA", "AutoNowB", "AutoNowC"} {
		if resp := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte("m")); resp.Code != remoting.ResponseSuccess {
			t.Fatalf("send to %s: %d %s", topic, resp.Code, resp.Remark)
		}
		if rd := tc.ns.Routes().PickupTopicRouteData(topic); rd == nil || len(rd.QueueDatas) == 0 {
			t.Fatalf("send creating %s answered before the name server routes it: %+v", topic, rd)
		}
	}
}
