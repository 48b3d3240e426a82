package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// tlsCluster starts a name server and a 3-member group whose listeners run
// in mode with certificates from one test CA; the brokers register with
// the name server over TLS, verifying its certificate; more has the last
// word on each member's config.
func tlsCluster(t *testing.T, mode remoting.TLSMode, more ...func(*BrokerConfig)) (*procCluster, *testutil.TestCA) {
	t.Helper()
	ca := testutil.NewTestCA(t, "raftmq-test")
	files := ca.Issue("node")
	server := remoting.TLSConfig{ServerMode: mode.String(), ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath}
	ns, nsAddr := startProcNameServerWith(t, func(c *namesrv.Config) { c.TLS = server })
	pc := startRealClusterOn(t, ns, nsAddr, func(c *BrokerConfig) {
		c.TLS = server
		c.TLS.ClientEnable, c.TLS.ClientTrustCertPath = true, ca.CertPath
		for _, f := range more {
			f(c)
		}
	})
	return pc, ca
}

// resetOfficialTLS turns the official client's TLS off again after the
// test. Its WithTls options write to the package-level
// remote.DefaultRemotingClientConfig that every client instance points at,
// so WithTls(true) on one producer turns TLS on for every official client
// created (or reconnecting) afterwards in the process, and WithTls(false)
// turns it off for all of them. Tests here never run in parallel, and the
// plaintext client of a test is created after its TLS clients are done.
func resetOfficialTLS(t *testing.T) {
	t.Cleanup(func() {
		if _, err := rocketmq.NewProducer(producer.WithTls(false), producer.WithNameServer(primitive.NamesrvAddr{"127.0.0.1:9876"})); err != nil {
			t.Error(err)
		}
	})
}

// officialSendAll sends n messages with the official producer opts and
// fails the test unless every send succeeds.
func officialSendAll(t *testing.T, nsAddr, topic, prefix string, n int, opts ...producer.Option) {
	t.Helper()
	p := officialProducer(t, nsAddr, opts...)
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s%d", prefix, i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("%s send %d: %v %v", prefix, i, res, err)
		}
	}
}

// TestOfficialTLSEnforcing: the unmodified official Go client with
// WithTls(true) produces and consumes against tlsServerMode=enforcing on
// the name server and the brokers; a plaintext official client is refused;
// the raftmq SDK's WithTLS verifies the servers against the CA.
func TestOfficialTLSEnforcing(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc, ca := tlsCluster(t, remoting.TLSEnforcing)
	resetOfficialTLS(t)
	const topic = "TLS_T"
	officialSendAll(t, pc.nsAddr, topic, "m", 10, producer.WithTls(true))

	got := newBodySet()
	officialPushConsumer(t, pc.nsAddr, "CG_TLS", topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}, consumer.WithTls(true))
	testutil.WaitFor(t, 30*time.Second, "10 messages consumed over TLS", func() bool { return got.len() == 10 })

	plain := officialProducer(t, pc.nsAddr, producer.WithTls(false), producer.WithRetry(0), producer.WithSendMsgTimeout(2*time.Second))
	if res, err := plain.SendSync(context.Background(), primitive.NewMessage(topic, []byte("plain"))); err == nil {
		t.Fatalf("plaintext official client sent through enforcing servers: %v", res)
	}

	p, err := client.NewProducer(client.NameServers(pc.nsAddr), client.WithTLS(ca.CertPath), client.ProducerGroup("PG_SDK_TLS"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("sdk"))); err != nil {
		t.Fatalf("raftmq SDK over verified TLS: %v", err)
	}
}

// TestOfficialTLSPermissive: in permissive mode one port serves the
// official client with and without TLS.
func TestOfficialTLSPermissive(t *testing.T) {
	pc, _ := tlsCluster(t, remoting.TLSPermissive)
	resetOfficialTLS(t)
	officialSendAll(t, pc.nsAddr, "TLS_P", "tls", 3, producer.WithTls(true))
	officialSendAll(t, pc.nsAddr, "TLS_P", "plain", 3, producer.WithTls(false))
}

// TestSDKTLSInnerProducers: against enforcing TLS servers, the producers
// a raftmq push consumer runs for itself connect over TLS as it does: an
// orderly message that exhausted its redeliveries is in %DLQ%group and the
// queue goes on behind it, and the consumer's trace records are stored.
func TestSDKTLSInnerProducers(t *testing.T) {
	pc, ca := tlsCluster(t, remoting.TLSEnforcing, func(c *BrokerConfig) { c.TraceTopicEnable = true })
	const topic, group = "TLS_INNER", "TLSInnerGroup"
	ctx := context.Background()
	tlsOn := client.WithTLS(ca.CertPath)
	admin, err := client.NewAdmin(client.NameServers(pc.nsAddr), tlsOn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(ctx) }()
	testutil.WaitFor(t, 30*time.Second, "topic "+topic+" created", func() bool {
		_, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}, "DefaultCluster", "")
		return err == nil
	})
	testutil.WaitFor(t, 10*time.Second, "route of "+topic, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil })
	p, err := client.NewProducer(client.NameServers(pc.nsAddr), tlsOn, client.ProducerGroup("PG_SDK_TLS_INNER"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(ctx) }()
	for _, body := range []string{"m0", "m1", "m2"} {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}

	c, err := client.NewPushConsumer(client.NameServers(pc.nsAddr), tlsOn, client.ConsumerGroup(group), client.WithLogger(testLogger()),
		client.WithTrace(""), client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(1),
		client.SuspendCurrentQueueTime(10*time.Millisecond), client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	var m2 atomic.Bool
	_ = c.RegisterOrderlyListener(func(_ context.Context, _ *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		for _, m := range msgs {
			if string(m.Body) == "m1" {
				return client.SuspendCurrentQueueAMoment
			}
			m2.Store(m2.Load() || string(m.Body) == "m2")
		}
		return client.OrderlySuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	stored := func(topic string) int64 {
		st, err := admin.TopicStatus(ctx, topic)
		if err != nil {
			return -1
		}
		var n int64
		for _, s := range st {
			n += s.MaxOffset - s.MinOffset
		}
		return n
	}
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 30*time.Second, "m1 in "+dlq+" and m2 consumed", func() bool {
		return stored(dlq) == 1 && m2.Load()
	})
	testutil.WaitFor(t, 30*time.Second, "trace records stored", func() bool { return stored(client.DefaultTraceTopic) > 0 })
}
