package client

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestInnerProducersConnectAsOwner: the producers a push consumer runs for
// itself (send-back and trace) take the owner's connection settings —
// name servers, timeouts, credentials, TLS, client IP — but keep a client
// id of their own and trace nothing.
func TestInnerProducersConnectAsOwner(t *testing.T) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	c, err := NewPushConsumer(NameServers("127.0.0.1:9876", "127.0.0.2:9876"), ConsumerGroup("InnerOwner"),
		WithCredentials("ak", "sk"), WithSecurityToken("tok"), WithTLSConfig(tlsCfg), RequestTimeout(7*time.Second),
		RouteRefreshInterval(time.Minute), ClientIP(net.IPv4(10, 0, 0, 9)), InstanceName("owner"), WithTrace(""))
	if err != nil {
		t.Fatal(err)
	}
	owner := c.core.cfg.common
	p, err := NewProducer(innerProducer(owner), ProducerGroup("CLIENT_INNER_PRODUCER"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.cfg.common
	if got.credentials != owner.credentials || got.tls.cfg != tlsCfg || got.requestTimeout != 7*time.Second ||
		got.routeRefreshInterval != time.Minute || !got.clientIP.Equal(owner.clientIP) || got.log != owner.log {
		t.Fatalf("inner producer's settings %+v, want the owner's %+v", got, owner)
	}
	if len(got.nameServers) != 2 || got.nameServers[1] != "127.0.0.2:9876" {
		t.Fatalf("inner producer's name servers %v", got.nameServers)
	}
	if got.traceTopic != "" {
		t.Fatalf("inner producer traces to %q", got.traceTopic)
	}
	if p.ClientID() == newClientID(owner.clientIP, owner.instanceName) {
		t.Fatalf("inner producer shares its owner's client id %s", p.ClientID())
	}
	_ = p.Close(context.Background())
}
