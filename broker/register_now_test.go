package broker

import (
	"testing"
	"time"
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
