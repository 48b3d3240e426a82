package client

import (
	"context"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestAdminDeleteTopicKeepsRouteWhenABrokerRefuses: as mqadmin's
// deleteTopic, a broker's refusal (here the one a broker gives for its own
// system topics) fails the deletion before the name servers are asked, so
// the route still names the topic the broker kept.
func TestAdminDeleteTopicKeepsRouteWhenABrokerRefuses(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"Kept": 2})
	a := newTestAdmin(t, ns)
	ctx := context.Background()
	b.answer(remoting.RequestDeleteTopicInBroker, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "The topic[Kept] is conflict with system topic. It is the broker's own topic")
	})
	if err := a.DeleteTopic(ctx, "Kept", "C"); err == nil || !strings.Contains(err.Error(), "own topic") {
		t.Fatalf("DeleteTopic: %v, want the broker's refusal", err)
	}
	if _, err := a.TopicRoute(ctx, "Kept"); err != nil {
		t.Fatalf("route after a refused delete: %v", err)
	}
}
