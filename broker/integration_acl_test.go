package broker

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/broker/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// aclTestFile is the plain_acl.yml every member of the test group loads:
// an admin, an application allowed one topic and one group, and nothing
// white-listed (the clients run on 127.0.0.1 like everything else).
const aclTestFile = `
accounts:
  - accessKey: adminKey1
    secretKey: adminSecret1
    admin: true
  - accessKey: appKey001
    secretKey: appSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopic=PUB|SUB
      - SubOnly=SUB
    groupPerms:
      - AclGroup=SUB
`

var (
	aclAdmin   = primitive.Credentials{AccessKey: "adminKey1", SecretKey: "adminSecret1"}
	aclApp     = primitive.Credentials{AccessKey: "appKey001", SecretKey: "appSecret01"}
	aclCluster = remoting.Credentials{AccessKey: "clusterKey1", SecretKey: "clusterSecret1"}
)

// startACLCluster starts a name server that authenticates registrations
// and a three-member group with aclEnable, each member with its own copy
// of aclTestFile; the harness's raw client signs as the admin.
func startACLCluster(t *testing.T, more ...func(*BrokerConfig)) *procCluster {
	t.Helper()
	dir := t.TempDir()
	ns, nsAddr := startProcNameServerWith(t, func(c *namesrv.Config) {
		c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = aclCluster.AccessKey, aclCluster.SecretKey
	})
	pc := startRealClusterOn(t, ns, nsAddr, func(c *BrokerConfig) {
		path := filepath.Join(dir, c.Raft.DLegerSelfID+"_plain_acl.yml")
		if err := os.WriteFile(path, []byte(aclTestFile), 0o600); err != nil {
			t.Fatal(err)
		}
		c.AclEnable, c.AclFile, c.AclReloadInterval = true, path, 20*time.Millisecond
		c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = aclCluster.AccessKey, aclCluster.SecretKey
		for _, f := range more {
			f(c)
		}
	})
	pc.client.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey}))
	return pc
}

// wantNoPermission fails unless err is a NO_PERMISSION answer whose
// remark contains want.
func wantNoPermission(t *testing.T, what string, err error, want string) {
	t.Helper()
	var be primitive.MQBrokerErr
	var re *remoting.RemoteError
	switch {
	case errors.As(err, &be):
		if be.ResponseCode != remoting.ResponseNoPermission || !strings.Contains(be.ErrorMessage, want) {
			t.Fatalf("%s: code %d %q, want NO_PERMISSION containing %q", what, be.ResponseCode, be.ErrorMessage, want)
		}
	case errors.As(err, &re):
		if re.Code != remoting.ResponseNoPermission || !strings.Contains(re.Remark, want) {
			t.Fatalf("%s: code %d %q, want NO_PERMISSION containing %q", what, re.Code, re.Remark, want)
		}
	default:
		if err == nil || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want NO_PERMISSION containing %q", what, err, want)
		}
	}
}

// TestACLOfficialClient: with aclEnable, the official Go client signed
// with an account's credentials produces and consumes what the account
// may; a wrong secret, an unknown account, a missing permission and an
// unsigned client are each refused with NO_PERMISSION naming why;
// topic administration needs the admin account. The group's leader
// polls its followers' RAFT_STATUS as the cluster account.
func TestACLOfficialClient(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()].Addr()
	for _, topic := range []string{"AclTopic", "SubOnly", "Forbidden"} {
		pc.createTopic(leader, topic, 2)
	}
	ctx := context.Background()

	t.Run("produce and consume", func(t *testing.T) {
		p := officialProducer(t, pc.nsAddr, producer.WithCredentials(aclApp))
		for i := range 10 {
			res, err := p.SendSync(ctx, primitive.NewMessage("AclTopic", []byte{'a', byte('0' + i)}))
			if err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %d: %v %v", i, res, err)
			}
		}
		got := newBodySet()
		officialPushConsumer(t, pc.nsAddr, "AclGroup", "AclTopic", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			got.add(msgs...)
			return consumer.ConsumeSuccess, nil
		}, consumer.WithCredentials(aclApp))
		testutil.WaitFor(t, 30*time.Second, "10 messages consumed through the ACL", func() bool { return got.len() == 10 })
	})

	send := func(creds *primitive.Credentials, topic string) error {
		opts := []producer.Option{producer.WithRetry(0)}
		if creds != nil {
			opts = append(opts, producer.WithCredentials(*creds))
		}
		p := officialProducer(t, pc.nsAddr, opts...)
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("x")))
		return err
	}
	t.Run("wrong secret", func(t *testing.T) {
		wantNoPermission(t, "wrong secret", send(&primitive.Credentials{AccessKey: aclApp.AccessKey, SecretKey: "not-the-secret"}, "AclTopic"),
			"signature check failed for accessKey=appKey001")
	})
	t.Run("unknown account", func(t *testing.T) {
		wantNoPermission(t, "unknown account", send(&primitive.Credentials{AccessKey: "nobody999", SecretKey: "whatever1"}, "AclTopic"),
			"no account for accessKey=nobody999")
	})
	t.Run("missing permission", func(t *testing.T) {
		wantNoPermission(t, "PUB on a SUB-only topic", send(&aclApp, "SubOnly"), "accessKey=appKey001 has no PUB permission on topic:SubOnly")
		wantNoPermission(t, "topic not listed", send(&aclApp, "Forbidden"), "no PUB permission on topic:Forbidden (default permission DENY)")
	})
	t.Run("unsigned", func(t *testing.T) {
		wantNoPermission(t, "no credentials", send(nil, "AclTopic"), "has no AccessKey")
	})
	t.Run("group permission", func(t *testing.T) {
		// A pull as a group the account may not use.
		pr := pullExt("OtherGroup", "AclTopic", 0, 0, 0)
		req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
		for k, v := range pr {
			req.ExtFields[k] = v
		}
		remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}.Sign(req)
		rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
		defer rc.Close()
		resp, err := rc.InvokeSync(ctx, leader, req)
		if err != nil {
			t.Fatal(err)
		}
		wantNoPermission(t, "pull as another group", remoting.ResponseError(leader, resp), "no SUB permission on group:OtherGroup")
	})

	// The official admin client signs only after its first
	// GetAllSubscriptionGroup (it registers its ACL interceptor there) and
	// ignores the answer's code: whether the topic exists afterwards is
	// the outcome.
	adminCreate := func(creds primitive.Credentials, topic string) {
		a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{pc.nsAddr})), admin.WithCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.GetAllSubscriptionGroup(ctx, leader, 5*time.Second); err != nil {
			t.Fatalf("signed read: %v", err)
		}
		_ = a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(leader))
	}
	topicExists := func(topic string) bool {
		_, ok := pc.groups[pc.leader()].State().Topic(topic)
		return ok
	}
	t.Run("admin operations", func(t *testing.T) {
		adminCreate(aclApp, "MadeByApp")
		if topicExists("MadeByApp") {
			t.Fatal("a non-admin account created a topic")
		}
		adminCreate(aclAdmin, "MadeByAdmin")
		testutil.WaitFor(t, 10*time.Second, "topic created by the admin account", func() bool { return topicExists("MadeByAdmin") })
		// The same refusal, read with our raw client.
		req := remoting.NewRequest(remoting.RequestDeleteTopicInBroker, nil, nil)
		req.ExtFields["topic"] = "AclTopic"
		remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}.Sign(req)
		rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
		defer rc.Close()
		resp, err := rc.InvokeSync(ctx, leader, req)
		if err != nil {
			t.Fatal(err)
		}
		wantNoPermission(t, "delete topic as app", remoting.ResponseError(leader, resp), "request code 215 needs an admin account; accessKey=appKey001 is not admin")
	})

	t.Run("leader polls followers as the cluster account", func(t *testing.T) {
		l := pc.nodes[pc.leader()]
		testutil.WaitFor(t, 15*time.Second, "follower RAFT_STATUS answered", func() bool {
			for _, addr := range pc.followerAddrs() {
				if _, err := l.metrics.followers.status(addr); err != nil {
					return false
				}
			}
			return true
		})
	})
}

// followerAddrs are the remoting addresses of the members not leading.
func (pc *procCluster) followerAddrs() []string {
	var out []string
	l := pc.leader()
	for i, n := range pc.nodes {
		if i != l && n != nil {
			out = append(out, n.Addr())
		}
	}
	return out
}

// TestACLSDKAndAdminCommands: our SDK with WithCredentials sends through
// the ACL and gets the same refusals; UPDATE_AND_CREATE_ACL_CONFIG (50)
// sent to every member grants a permission that takes effect without a
// restart, and GET_BROKER_CLUSTER_ACL_INFO (52) shows the members agree;
// non-admin accounts cannot change the ACL.
func TestACLSDKAndAdminCommands(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "AclTopic", 2)
	pc.createTopic(leader, "Granted", 2)
	ctx := context.Background()

	sdk := func(ak, sk string) *client.Producer {
		p, err := client.NewProducer(client.NameServers(pc.nsAddr), client.WithLogger(testLogger()),
			client.WithCredentials(ak, sk), client.RetryTimesWhenSendFailed(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(ctx) })
		return p
	}
	app := sdk(aclApp.AccessKey, aclApp.SecretKey)
	if _, err := app.SendSync(ctx, client.NewMessage("AclTopic", []byte("sdk"))); err != nil {
		t.Fatalf("SDK send with credentials: %v", err)
	}
	_, err := app.SendSync(ctx, client.NewMessage("Granted", []byte("sdk")))
	wantNoPermission(t, "SDK send before the grant", err, "no PUB permission on topic:Granted")
	_, err = sdk(aclApp.AccessKey, "wrong-secret").SendSync(ctx, client.NewMessage("AclTopic", []byte("sdk")))
	wantNoPermission(t, "SDK wrong secret", err, "signature check failed")

	// The SDK's push consumer signs its heartbeats, pulls and offset
	// commits.
	got := make(chan string, 16)
	c, err := client.NewPushConsumer(append(sdkConsumerOpts(pc.nsAddr, "AclGroup"), client.WithCredentials(aclApp.AccessKey, aclApp.SecretKey))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SubscribeSelector("AclTopic", client.Tags("*")); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return client.ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	select {
	case b := <-got:
		if b != "sdk" {
			t.Fatalf("consumed %q", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SDK consumer with credentials got nothing")
	}

	// The SDK's admin client: topic administration needs the admin account.
	sdkAdmin := func(ak, sk string) *client.Admin {
		a, err := client.NewAdmin(client.NameServers(pc.nsAddr), client.WithCredentials(ak, sk))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(ctx) })
		return a
	}
	spec := client.TopicSpec{Topic: "ByAdmin", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	_, err = sdkAdmin(aclApp.AccessKey, aclApp.SecretKey).CreateTopic(ctx, spec, "", leader)
	wantNoPermission(t, "SDK admin as app", err, "request code 17 needs an admin account")
	if _, err := sdkAdmin(aclAdmin.AccessKey, aclAdmin.SecretKey).CreateTopic(ctx, spec, "", leader); err != nil {
		t.Fatalf("SDK admin as admin: %v", err)
	}

	// Grant PUB on Granted on every member.
	grant := func(signer remoting.Credentials) []*remoting.RemotingCommand {
		rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
		defer rc.Close()
		rc.AddHook(remoting.SigningHook(signer))
		var out []*remoting.RemotingCommand
		for _, n := range pc.nodes {
			h := wire.CreateAccessConfigRequestHeader{AccessKey: aclApp.AccessKey, TopicPerms: "AclTopic=PUB|SUB,SubOnly=SUB,Granted=PUB"}
			resp, err := rc.InvokeSync(ctx, n.Addr(), remoting.NewRequest(remoting.RequestUpdateACLConfig, &h, nil))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp)
		}
		return out
	}
	for _, resp := range grant(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}) {
		wantNoPermission(t, "ACL change by a non-admin", remoting.ResponseError("", resp), "request code 50 needs an admin account")
	}
	for _, resp := range grant(remoting.Credentials{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey}) {
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("grant: %d %s", resp.Code, resp.Remark)
		}
	}
	if _, err := app.SendSync(ctx, client.NewMessage("Granted", []byte("sdk"))); err != nil {
		t.Fatalf("SDK send after the grant: %v", err)
	}
	var hashes []string
	for _, n := range pc.nodes {
		resp := pc.call(n.Addr(), remoting.RequestGetBrokerACLInfo, nil, nil)
		var h wire.GetBrokerAclConfigResponseHeader
		if err := resp.DecodeHeader(&h); err != nil || !h.AclEnable || h.AclHash == "" || !strings.Contains(h.Version, `"counter":1`) {
			t.Fatalf("ACL info of %s: %v %+v", n.Addr(), err, h)
		}
		hashes = append(hashes, h.AclHash)
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("members disagree after the same change: %v", hashes)
	}
}

// TestRegistrationAuth: a name server with clusterAuth* accepts the
// group's signed registrations and refuses an unsigned or wrongly signed
// REGISTER_BROKER claiming brokerId 0 of that group, which leaves the
// route untouched.
func TestRegistrationAuth(t *testing.T) {
	ns, nsAddr := startProcNameServerWith(t, func(c *namesrv.Config) {
		c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = aclCluster.AccessKey, aclCluster.SecretKey
	})
	pc := startRealClusterOn(t, ns, nsAddr, func(c *BrokerConfig) {
		c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = aclCluster.AccessKey, aclCluster.SecretKey
	})
	leaderAddr := pc.nodes[pc.leader()].Addr()
	cfg := pc.cfgs[0]
	rogue := func(creds *remoting.Credentials) *remoting.RemotingCommand {
		h := wire.RegisterBrokerRequestHeader{BrokerName: cfg.BrokerName, BrokerAddr: "127.0.0.1:1", ClusterName: cfg.BrokerClusterName,
			HAServerAddr: "127.0.0.1:2", BrokerID: 0}
		body := wire.RegisterBrokerBody{TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]wire.TopicConfig{},
			DataVersion:      wire.DataVersion{StateVersion: 1 << 40, Timestamp: time.Now().UnixMilli(), Counter: 1 << 40}}}
		enc, err := wire.EncodeRegisterBrokerBody(&body, false)
		if err != nil {
			t.Fatal(err)
		}
		req := remoting.NewRequest(remoting.RequestRegisterBroker, &h, enc)
		rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
		defer rc.Close()
		if creds != nil {
			rc.AddHook(remoting.SigningHook(*creds))
		}
		resp, err := rc.InvokeSync(context.Background(), nsAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct {
		name  string
		creds *remoting.Credentials
		want  string
	}{
		{"unsigned", nil, "REGISTER_BROKER refused: it is not signed"},
		{"wrong secret", &remoting.Credentials{AccessKey: aclCluster.AccessKey, SecretKey: "guessed-secret"}, "signature check failed"},
		{"other account", &remoting.Credentials{AccessKey: "someoneElse", SecretKey: "guessed-secret"}, "is not the cluster's"},
	} {
		resp := rogue(c.creds)
		if resp.Code != remoting.ResponseNoPermission || !strings.Contains(resp.Remark, c.want) {
			t.Fatalf("%s: %d %q, want NO_PERMISSION containing %q", c.name, resp.Code, resp.Remark, c.want)
		}
	}
	ci := pc.call(nsAddr, remoting.RequestGetBrokerClusterInfo, nil, nil)
	info, err := wire.DecodeClusterInfo(ci.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.BrokerAddrTable[cfg.BrokerName].BrokerAddrs[wire.MasterID]; got != leaderAddr {
		t.Fatalf("brokerId 0 of %s is %q after the forged registrations, want the leader %s", cfg.BrokerName, got, leaderAddr)
	}
}

// TestACLConfigRefusals: a broker with aclEnable and no usable file, with
// half a cluster account, or with aclEnable and no cluster account (the
// members' requests to each other, which member changes, catch-up and
// config forwarding need, would all be refused), does not start; the error
// names the key.
func TestACLConfigRefusals(t *testing.T) {
	t.Setenv("ROCKETMQ_HOME", "")
	bad := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(bad, []byte("accounts:\n  - accessKey: short\n    secretKey: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(good, []byte(aclTestFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(*BrokerConfig)
		want string
	}{
		{"no file, no ROCKETMQ_HOME", func(c *BrokerConfig) { c.AclEnable = true }, "aclEnable=true needs aclFile"},
		{"missing file", func(c *BrokerConfig) { c.AclEnable, c.AclFile = true, filepath.Join(t.TempDir(), "none.yml") }, "none.yml"},
		{"invalid file", func(c *BrokerConfig) { c.AclEnable, c.AclFile = true, bad }, "at least 7 characters"},
		{"half a cluster account", func(c *BrokerConfig) { c.ClusterAuthAccessKey = "clusterKey1" }, "clusterAuthAccessKey and clusterAuthSecretKey go together"},
		{"short cluster secret", func(c *BrokerConfig) { c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = "clusterKey1", "abc" },
			"clusterAuthAccessKey and clusterAuthSecretKey must be at least 7 characters each"},
		{"no cluster account", func(c *BrokerConfig) { c.AclEnable, c.AclFile = true, good }, "aclEnable=true needs clusterAuthAccessKey and clusterAuthSecretKey"},
	} {
		cfg := testBrokerConfig(t, "127.0.0.1:1", testutil.FreePort(t))
		c.set(&cfg)
		_, err := New(cfg, newFakeReplica(t, cfg.RemotingAddr()), nil)
		if !errors.Is(err, ErrInvalidBrokerConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidBrokerConfig naming %q", c.name, err, c.want)
		}
	}
	home := t.TempDir()
	t.Setenv("ROCKETMQ_HOME", home)
	for file, want := range map[string]string{"": filepath.Join(home, "conf", "plain_acl.yml"), "acl/x.yml": filepath.Join(home, "acl/x.yml"), "/etc/x.yml": "/etc/x.yml"} {
		if got, err := (ACLConfig{AclFile: file}).ACLFilePath(); err != nil || got != want {
			t.Errorf("aclFile %q: %q %v, want %q", file, got, err, want)
		}
	}
	ncfg := namesrv.DefaultConfig()
	ncfg.ClusterAuthSecretKey = "secret-only"
	if _, err := namesrv.New(ncfg, nil); !errors.Is(err, namesrv.ErrInvalidConfig) {
		t.Errorf("name server with half a cluster account: %v", err)
	}
	ncfg.ClusterAuthAccessKey, ncfg.ClusterAuthSecretKey = "clusterKey1", "abc"
	if _, err := namesrv.New(ncfg, nil); !errors.Is(err, namesrv.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 7 characters") {
		t.Errorf("name server with a 3-character cluster secret: %v", err)
	}
}

// TestBrokerConfigRedactsSecrets: GET_BROKER_CONFIG (an admin code under
// ACL, open to anyone without it) masks the cluster account's secret and
// gossipSecretKey, which keeps strangers out of the gossip pool.
func TestBrokerConfigRedactsSecrets(t *testing.T) {
	cfg := testBrokerConfig(t, "127.0.0.1:1", testutil.FreePort(t))
	cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = aclCluster.AccessKey, "cluster-secret-value"
	cfg.Gossip.SecretKey = "Z29zc2lwLXNlY3JldC12YWw=" // base64 of 16 bytes
	c, err := New(cfg, newFakeReplica(t, cfg.RemotingAddr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	body := string(c.processGetBrokerConfig().Body)
	for _, secret := range []string{"cluster-secret-value", cfg.Gossip.SecretKey} {
		if strings.Contains(body, secret) {
			t.Errorf("GET_BROKER_CONFIG shows the secret %q:\n%s", secret, body)
		}
	}
	for _, want := range []string{"clusterAuthSecretKey=******", "gossipSecretKey=******", "clusterAuthAccessKey=" + aclCluster.AccessKey} {
		if !strings.Contains(body, want) {
			t.Errorf("GET_BROKER_CONFIG lacks %q", want)
		}
	}
}

// TestACLSendHeaderShapes: the send codes take either header shape (the
// official Go client sends SEND_BATCH_MESSAGE with the long names), and
// the ACL checks the topic the send path writes to whichever shape comes:
// an account without PUB on a topic cannot write to it through
// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or SEND_REPLY_MESSAGE_V2 with long
// field names, and nothing is stored.
func TestACLSendHeaderShapes(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()]
	pc.createTopic(leader.Addr(), "Forbidden", 2)
	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer rc.Close()
	rc.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}))
	batch, err := wire.EncodeBatch([]wire.BatchEntry{{Body: []byte("b1")}, {Body: []byte("b2")}})
	if err != nil {
		t.Fatal(err)
	}
	reply := wire.EncodeProperties(map[string]string{wire.PropertyReplyToClient: "requester@1"})
	for _, c := range []struct {
		name  string
		code  int16
		ext   map[string]string
		body  []byte
		topic string
	}{
		{"SEND_MESSAGE", remoting.RequestSendMessage, sendExt("Forbidden", 0, ""), []byte("one"), "Forbidden"},
		{"SEND_MESSAGE_V2 with long names", remoting.RequestSendMessageV2, sendExt("Forbidden", 0, ""), []byte("one"), "Forbidden"},
		{"SEND_BATCH_MESSAGE with long names", remoting.RequestSendBatchMessage, sendExt("Forbidden", 1, ""), batch, "Forbidden"},
		{"SEND_REPLY_MESSAGE_V2 with long names", remoting.RequestSendReplyMessageV2, sendExt("Forbidden", 0, reply), []byte("r"), "Forbidden"},
		{"SEND_MESSAGE_V2 with short names", remoting.RequestSendMessageV2, map[string]string{"a": "PG", "b": "Forbidden", "c": wire.TopicAutoCreate,
			"d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}, []byte("one"), "Forbidden"},
	} {
		req := remoting.NewRequest(c.code, nil, c.body)
		for k, v := range c.ext {
			req.ExtFields[k] = v
		}
		resp, err := rc.InvokeSync(context.Background(), leader.Addr(), req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantNoPermission(t, c.name, remoting.ResponseError(leader.Addr(), resp), "no PUB permission on topic:"+c.topic)
	}
	// The same batch to a topic the account may publish to is stored.
	pc.createTopic(leader.Addr(), "AclTopic", 2)
	req := remoting.NewRequest(remoting.RequestSendBatchMessage, nil, batch)
	for k, v := range sendExt("AclTopic", 1, "") {
		req.ExtFields[k] = v
	}
	if resp, err := rc.InvokeSync(context.Background(), leader.Addr(), req); err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("batch to AclTopic: %v %v", resp, err)
	}
	for q := range int32(2) {
		if n := leader.st.GetMaxOffsetInQueue("Forbidden", q); n != 0 {
			t.Fatalf("Forbidden/%d holds %d messages sent without PUB", q, n)
		}
	}
}

// TestACLStoredMessageTopic: VIEW_MESSAGE_BY_ID and
// CONSUMER_SEND_MSG_BACK name a message by its CommitLog offset, not by
// topic; an account without SUB on the message's topic can neither read
// it nor copy it into its own group's retry topic (to pull it from
// there), while a message of a topic it may read stays viewable and can
// be sent back.
func TestACLStoredMessageTopic(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()]
	pc.createTopic(leader.Addr(), "Forbidden", 1)
	pc.createTopic(leader.Addr(), "AclTopic", 1)
	offsetOf := func(topic string) int64 {
		resp := pc.call(leader.Addr(), remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte("secret of "+topic)) // signed as the admin
		return sentOffset(t, "to "+topic, resp)
	}
	forbidden, allowed := offsetOf("Forbidden"), offsetOf("AclTopic")
	testutil.WaitFor(t, 10*time.Second, "both messages applied", func() bool { return leader.st.DispatchedOffset() > allowed })

	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer rc.Close()
	rc.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}))
	call := func(code int16, ext map[string]string) *remoting.RemotingCommand {
		req := remoting.NewRequest(code, nil, nil)
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		resp, err := rc.InvokeSync(context.Background(), leader.Addr(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	view := func(off int64) *remoting.RemotingCommand {
		return call(remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)})
	}
	sendBack := func(off int64) *remoting.RemotingCommand {
		return call(remoting.RequestConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(off, 10), "group": "AclGroup", "delayLevel": "-1"})
	}

	resp := view(forbidden)
	if strings.Contains(string(resp.Body), "secret of Forbidden") {
		t.Fatal("VIEW_MESSAGE_BY_ID showed a Forbidden message to an account without SUB on it")
	}
	wantNoPermission(t, "view a Forbidden message", remoting.ResponseError(leader.Addr(), resp), "no SUB permission on topic:Forbidden")
	wantNoPermission(t, "send back a Forbidden message", remoting.ResponseError(leader.Addr(), sendBack(forbidden)), "no SUB permission on topic:Forbidden")
	if _, ok := leader.rep.State().Topic(wire.DLQGroupTopicPrefix + "AclGroup"); ok && leader.st.GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+"AclGroup", 0) != 0 {
		t.Fatal("the Forbidden message was copied into AclGroup's DLQ")
	}

	if resp := view(allowed); resp.Code != remoting.ResponseSuccess || !strings.Contains(string(resp.Body), "secret of AclTopic") {
		t.Fatalf("view an AclTopic message: %d %s", resp.Code, resp.Remark)
	}
	if resp := sendBack(allowed); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send back an AclTopic message: %d %s", resp.Code, resp.Remark)
	}
}

// TestACLSystemTopicPull: the broker's own topics hold other topics'
// messages (SCHEDULE_TOPIC_XXXX the delayed ones, the half topic the
// uncommitted ones), so an account whose defaultTopicPerm is SUB cannot
// pull them to read a topic it is denied: they need an admin account.
func TestACLSystemTopicPull(t *testing.T) {
	const readerFile = aclTestFile + `
  - accessKey: readerKey1
    secretKey: readerSecret1
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms:
      - Secret=DENY
`
	pc := startACLCluster(t, func(c *BrokerConfig) {
		if err := os.WriteFile(c.AclFile, []byte(readerFile), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	leader := pc.nodes[pc.leader()]
	pc.createTopic(leader.Addr(), "Secret", 1)
	props := wire.EncodeProperties(map[string]string{wire.PropertyDelayTimeLevel: "3"})
	if resp := pc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("Secret", 0, props), []byte("delayed secret")); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("delayed send: %d %s", resp.Code, resp.Remark)
	}
	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer rc.Close()
	rc.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: "readerKey1", SecretKey: "readerSecret1"}))
	pull := func(topic string, queue int) *remoting.RemotingCommand {
		req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
		for k, v := range pullExt("ReaderGroup", topic, queue, 0, 0) {
			req.ExtFields[k] = v
		}
		resp, err := rc.InvokeSync(context.Background(), leader.Addr(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantNoPermission(t, "pull Secret", remoting.ResponseError(leader.Addr(), pull("Secret", 0)), "no SUB permission on topic:Secret")
	resp := pull(wire.TopicSchedule, 2)
	if strings.Contains(string(resp.Body), "delayed secret") {
		t.Fatal("a pull of SCHEDULE_TOPIC_XXXX showed a Secret message to an account denied Secret")
	}
	wantNoPermission(t, "pull SCHEDULE_TOPIC_XXXX", remoting.ResponseError(leader.Addr(), resp), "needs an admin account")
}

// TestACLStoredHalfNeedsAdmin: a transaction half (undecided or rolled
// back) and an op record are never delivered, so SUB on the half's real
// topic, or a defaultTopicPerm of SUB, is not enough to read one by its
// CommitLog offset or to send it back into a retry topic: that needs an
// admin account. A delayed message still counts as its real topic's.
func TestACLStoredHalfNeedsAdmin(t *testing.T) {
	const readerFile = aclTestFile + `
  - accessKey: readerKey1
    secretKey: readerSecret1
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`
	pc := startACLCluster(t, func(c *BrokerConfig) {
		if err := os.WriteFile(c.AclFile, []byte(readerFile), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	li := pc.leader()
	leader := pc.nodes[li]
	pc.createTopic(leader.Addr(), "AclTopic", 1)
	undecided := sendHalf(t, pc, leader.Addr(), "AclTopic", "undecided half", "UH1")
	rolledBack := sendHalf(t, pc, leader.Addr(), "AclTopic", "rolled-back half", "UH2")
	if r := pc.call(leader.Addr(), remoting.RequestEndTransaction, endExt(rolledBack, wire.SysFlagTransRollback, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	props := wire.EncodeProperties(map[string]string{wire.PropertyDelayTimeLevel: "18"})
	resp := pc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("AclTopic", 0, props), []byte("delayed message"))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("delayed send: %d %s", resp.Code, resp.Remark)
	}
	delayedID, err := wire.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	var opRecord int64
	testutil.WaitFor(t, 10*time.Second, "the op record applied", func() bool {
		res, err := leader.st.GetMessage("", wire.TopicTransOpHalf, 0, 0, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			return false
		}
		m, _, err := wire.DecodeMessage(res.Messages[0], false)
		if err != nil {
			t.Fatal(err)
		}
		opRecord = m.PhysicalOffset
		return leader.st.DispatchedOffset() > delayedID.Offset
	})

	client := func(cr primitive.Credentials) func(code int16, ext map[string]string) *remoting.RemotingCommand {
		rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
		t.Cleanup(func() { _ = rc.Close() })
		rc.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: cr.AccessKey, SecretKey: cr.SecretKey}))
		return func(code int16, ext map[string]string) *remoting.RemotingCommand {
			req := remoting.NewRequest(code, nil, nil)
			for k, v := range ext {
				req.ExtFields[k] = v
			}
			resp, err := rc.InvokeSync(context.Background(), leader.Addr(), req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
	}
	app, reader, admin := client(aclApp), client(primitive.Credentials{AccessKey: "readerKey1", SecretKey: "readerSecret1"}), client(aclAdmin)
	view := func(as func(int16, map[string]string) *remoting.RemotingCommand, off int64) *remoting.RemotingCommand {
		return as(remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)})
	}
	for _, c := range []struct {
		name string
		as   func(int16, map[string]string) *remoting.RemotingCommand
		off  int64
		body string
	}{
		{"an undecided half, with SUB on its real topic", app, undecided.phy, "undecided half"},
		{"a rolled-back half, with SUB on its real topic", app, rolledBack.phy, "rolled-back half"},
		{"an undecided half, with defaultTopicPerm SUB", reader, undecided.phy, "undecided half"},
		{"an op record, with defaultTopicPerm SUB", reader, opRecord, ""},
	} {
		resp := view(c.as, c.off)
		if c.body != "" && strings.Contains(string(resp.Body), c.body) {
			t.Errorf("view %s: the body was shown", c.name)
		}
		wantNoPermission(t, "view "+c.name, remoting.ResponseError(leader.Addr(), resp), "needs an admin account")
	}
	sendBack := app(remoting.RequestConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(undecided.phy, 10), "group": "AclGroup", "delayLevel": "1"})
	wantNoPermission(t, "send back an undecided half", remoting.ResponseError(leader.Addr(), sendBack), "needs an admin account")
	if n := leader.st.GetMaxOffsetInQueue(wire.TopicSchedule, 0); n != 0 {
		t.Fatalf("the schedule topic's level-1 queue holds %d messages after a refused send-back", n)
	}

	if resp := view(admin, undecided.phy); resp.Code != remoting.ResponseSuccess || !strings.Contains(string(resp.Body), "undecided half") {
		t.Fatalf("admin views the undecided half: %d %s", resp.Code, resp.Remark)
	}
	if resp := view(app, delayedID.Offset); resp.Code != remoting.ResponseSuccess || !strings.Contains(string(resp.Body), "delayed message") {
		t.Fatalf("view a delayed AclTopic message: %d %s", resp.Code, resp.Remark)
	}
}

// startACLFakeBroker starts one broker over a fake replica with aclEnable
// (its own copy of aclTestFile, at c.acl.Path()) and returns it with a
// client signing as the admin account.
func startACLFakeBroker(t *testing.T, log *zap.Logger) (*Controller, *remoting.Client) {
	t.Helper()
	_, nsAddr := startProcNameServer(t)
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	cfg.AclFile = filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(cfg.AclFile, []byte(aclTestFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.AclEnable = true
	cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = aclCluster.AccessKey, aclCluster.SecretKey
	c, err := New(cfg, newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port)), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	cl.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey}))
	t.Cleanup(func() {
		_ = cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c, cl
}

// TestACLDebugLogMasksSecrets: with debug logging, the request log of an
// UPDATE_AND_CREATE_ACL_CONFIG shows neither the new account's secret key
// nor the request's Signature, and still shows the other fields.
func TestACLDebugLogMasksSecrets(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	c, cl := startACLFakeBroker(t, zap.New(core))

	const newSecret = "brandNewSecret-42"
	req := remoting.NewRequest(remoting.RequestUpdateACLConfig, nil, nil)
	req.ExtFields["accessKey"] = "newAccount1"
	req.ExtFields["secretKey"] = newSecret
	req.ExtFields["defaultTopicPerm"] = "PUB"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.InvokeSync(ctx, c.Addr(), req)
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("UPDATE_AND_CREATE_ACL_CONFIG: %v %v", resp, err)
	}
	sig := req.ExtFields[remoting.ExtSignature]
	if sig == "" {
		t.Fatal("the request was not signed")
	}
	var logged map[string]string
	testutil.WaitFor(t, 5*time.Second, "the request logged", func() bool {
		for _, e := range logs.FilterMessage("request").All() {
			if e.ContextMap()["code"] == remoting.RequestUpdateACLConfig {
				logged, _ = e.ContextMap()["ext"].(map[string]string)
				return true
			}
		}
		return false
	})
	for k, v := range logged {
		if strings.Contains(v, newSecret) || strings.Contains(v, sig) {
			t.Errorf("the debug log shows %s=%q", k, v)
		}
	}
	if logged["accessKey"] != "newAccount1" || logged["AccessKey"] != aclAdmin.AccessKey || logged["secretKey"] != "******" {
		t.Errorf("logged ext %v: want the access keys shown and the secret key masked", logged)
	}
}

// TestACLUpdateEmptyPermsClears: UPDATE_AND_CREATE_ACL_CONFIG with an
// empty topicPerms (mqadmin updateAclConfig -t "") clears the account's
// topic list, as RocketMQ does, so the topics fall back to its default
// permission; an absent groupPerms keeps the group list.
func TestACLUpdateEmptyPermsClears(t *testing.T) {
	c, cl := startACLFakeBroker(t, zap.NewNop())
	app := func(res acl.Resource) error {
		return c.acl.Rules().Check(acl.Request{AccessKey: aclApp.AccessKey, Addr: netip.MustParseAddr("192.0.2.1"),
			Verify: func(secret string) bool { return secret == aclApp.SecretKey }, Resources: []acl.Resource{res}})
	}
	topic, group := acl.Resource{Name: "AclTopic", Perm: acl.Sub}, acl.GroupResource("AclGroup", acl.Sub)
	if err := app(topic); err != nil {
		t.Fatalf("before: %v", err)
	}
	req := remoting.NewRequest(remoting.RequestUpdateACLConfig, nil, nil)
	req.ExtFields["accessKey"], req.ExtFields["topicPerms"] = aclApp.AccessKey, ""
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := cl.InvokeSync(ctx, c.Addr(), req); err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("UPDATE_AND_CREATE_ACL_CONFIG: %v %v", resp, err)
	}
	if err := app(topic); err == nil {
		t.Error("an empty topicPerms left the account's topic permissions in force")
	}
	if err := app(group); err != nil {
		t.Errorf("an absent groupPerms changed the group permissions: %v", err)
	}
	data, err := os.ReadFile(c.acl.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "AclTopic") || !strings.Contains(string(data), "AclGroup=SUB") {
		t.Errorf("rewritten file:\n%s", data)
	}
}

// TestACLUpdateEmptyWhiteAddressClears: UPDATE_AND_CREATE_ACL_CONFIG
// with an empty whiteRemoteAddress (mqadmin updateAclConfig -w "")
// withdraws the unsigned access the account's white address gave, as
// RocketMQ does; an update without the field keeps it.
func TestACLUpdateEmptyWhiteAddressClears(t *testing.T) {
	c, cl := startACLFakeBroker(t, zap.NewNop())
	update := func(ext map[string]string) {
		t.Helper()
		req := remoting.NewRequest(remoting.RequestUpdateACLConfig, nil, nil)
		req.ExtFields["accessKey"] = aclApp.AccessKey
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if resp, err := cl.InvokeSync(ctx, c.Addr(), req); err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("UPDATE_AND_CREATE_ACL_CONFIG %v: %v %v", ext, resp, err)
		}
	}
	unsigned := func() error {
		return c.acl.Rules().Check(acl.Request{AccessKey: aclApp.AccessKey, Addr: netip.MustParseAddr("192.0.2.1"),
			Verify: func(string) bool { return false }})
	}
	update(map[string]string{"whiteRemoteAddress": "192.0.2.*"})
	if err := unsigned(); err != nil {
		t.Fatalf("white-listed: %v", err)
	}
	update(map[string]string{"defaultTopicPerm": "SUB"})
	if err := unsigned(); err != nil {
		t.Fatalf("an update without whiteRemoteAddress dropped it: %v", err)
	}
	update(map[string]string{"whiteRemoteAddress": ""})
	if err := unsigned(); err == nil {
		t.Fatal("an empty whiteRemoteAddress left the address's unsigned access in force")
	}
}
