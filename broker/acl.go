package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/acl"
	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// ACLConfig holds the broker.conf keys of RocketMQ's plain ACL and of the
// authentication of this broker's registrations with the name servers.
type ACLConfig struct {
	// AclEnable checks every request against plain_acl.yml (RocketMQ's
	// aclEnable): signed by an account, with the permission the request
	// needs on its topic and group; refusals answer NO_PERMISSION.
	AclEnable bool `prop:"aclEnable"`
	// AclFile is plain_acl.yml's path. Empty means RocketMQ's default,
	// $ROCKETMQ_HOME/conf/plain_acl.yml; a relative path is taken from
	// $ROCKETMQ_HOME when it is set (RocketMQ's rocketmq.acl.plain.file),
	// else from the working directory.
	AclFile string `prop:"aclFile"`
	// AclReloadInterval is how often the file is polled for changes
	// (default 1 s; RocketMQ's FileWatchService polls every 500 ms).
	AclReloadInterval time.Duration `prop:"aclReloadInterval"`
	// ClusterAuthAccessKey and ClusterAuthSecretKey sign this broker's
	// requests to the name servers (REGISTER_BROKER, UNREGISTER_BROKER,
	// the heartbeats) and to the other members; name servers configured
	// with the same pair refuse unsigned registrations. Required with
	// aclEnable (loadACL). An ACL admin account's keys may serve.
	ClusterAuthAccessKey string `prop:"clusterAuthAccessKey"`
	ClusterAuthSecretKey string `prop:"clusterAuthSecretKey"`
}

const defaultACLReloadInterval = time.Second

// ACLFilePath resolves AclFile (see its doc).
func (c ACLConfig) ACLFilePath() (string, error) {
	home := os.Getenv("ROCKETMQ_HOME")
	switch {
	case c.AclFile == "" && home == "":
		return "", fmt.Errorf("%w: aclEnable=true needs aclFile (or ROCKETMQ_HOME, for $ROCKETMQ_HOME/conf/plain_acl.yml)", ErrInvalidBrokerConfig)
	case c.AclFile == "":
		return filepath.Join(home, "conf", "plain_acl.yml"), nil
	case filepath.IsAbs(c.AclFile) || home == "":
		return c.AclFile, nil
	}
	return filepath.Join(home, c.AclFile), nil
}

// ClusterCredentials are the registration credentials (zero when unset).
func (c ACLConfig) ClusterCredentials() (remoting.Credentials, error) {
	cr := remoting.Credentials{AccessKey: c.ClusterAuthAccessKey, SecretKey: c.ClusterAuthSecretKey}
	if err := cr.CheckConfigured("clusterAuthAccessKey", "clusterAuthSecretKey"); err != nil {
		return cr, fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err)
	}
	return cr, nil
}

// aclState is the controller's ACL (nil unless aclEnable): the rules' file
// and the count of refusals.
type aclState struct {
	*acl.Store
	denied prometheus.Counter
	// cluster is the cluster account (clusterAuth*), zero when unset.
	// Brokers sign their own calls to each other with it (the leader's
	// RAFT_STATUS poll of its followers), so it passes as an admin
	// account without being listed in plain_acl.yml, like RocketMQ 5's
	// inner-client credentials.
	cluster remoting.Credentials
}

// loadACL reads the ACL keys and plain_acl.yml before New builds anything
// that runs goroutines, so a bad file fails New with nothing to stop.
func loadACL(cfg BrokerConfig, log *zap.Logger) (*aclState, error) {
	creds, err := cfg.ClusterCredentials()
	if err != nil || !cfg.AclEnable {
		return nil, err
	}
	path, err := cfg.ACLFilePath()
	if err != nil {
		return nil, err
	}
	st, err := acl.Open(path, log.Named("acl"))
	if err != nil {
		return nil, fmt.Errorf("%w: aclEnable=true: %w", ErrInvalidBrokerConfig, err)
	}
	// The members sign their requests to each other with the cluster
	// account (the leader's RAFT_STATUS polls that promote a learner, a
	// new member's CATCHUP_READ, a forwarded UPDATE_BROKER_CONFIG, a
	// member's check whether it was removed). RocketMQ's brokers replicate
	// outside the remoting ACL and need none; here every one of those would
	// be refused, and addMember would wait out its catch-up timeout.
	if creds.IsZero() {
		return nil, fmt.Errorf("%w: aclEnable=true needs clusterAuthAccessKey and clusterAuthSecretKey, the same on every member "+
			"of the group: the members sign their requests to each other with them (member changes, catch-up, config forwarding), "+
			"and to the name servers", ErrInvalidBrokerConfig)
	}
	return &aclState{Store: st, cluster: creds}, nil
}

// initACL installs what loadACL prepared: the check on the remoting
// servers (aclEnable) and the ACL administration codes (50-53, answered
// "ACL is off" without aclEnable). The signing of requests to the name
// servers and the other members is newMemberClient's. Called from New.
func (c *Controller) initACL(st *aclState) {
	if st != nil {
		c.acl = st
		st.denied = prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "acl_denied_total",
			Help: "Requests refused with NO_PERMISSION by the ACL (aclEnable).",
		})
		c.metrics.reg.MustRegister(st.denied)
	}
	for _, s := range []*remoting.Server{c.srv, c.vip} {
		if s == nil {
			continue
		}
		if c.acl != nil {
			s.SetGuard(c.aclGuard)
		}
		q := c.cfg.AdminBrokerThreadPoolNums
		s.Register(remoting.RequestUpdateACLConfig, c.instrument(c.processUpdateACLConfig), 1, 64)
		s.Register(remoting.RequestDeleteACLConfig, c.instrument(c.processDeleteACLConfig), 1, 64)
		s.Register(remoting.RequestUpdateGlobalWhiteAddrs, c.instrument(c.processUpdateGlobalWhiteAddrs), 1, 64)
		s.Register(remoting.RequestGetBrokerACLInfo, c.instrument(c.processGetBrokerACLInfo), q, 64)
	}
}

// startACL starts the file poller (Start).
func (c *Controller) startACL() {
	if c.acl == nil {
		return
	}
	every := c.cfg.AclReloadInterval
	if every <= 0 {
		every = defaultACLReloadInterval
	}
	c.goFunc(func() { c.acl.Watch(c.quit, every) })
}

// aclGuard checks one request against the rules in force; a refusal is
// NO_PERMISSION with the reason as remark. It runs on the connection's
// reader (remoting.Guard): header lookups and one HMAC, plus the JSON
// body of heartbeats.
func (c *Controller) aclGuard(conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	return c.aclCheck(conn, req, nil, false)
}

// aclStoredMessage checks, with aclEnable, that req's account may read a
// stored message the request names by its CommitLog offset
// (VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK): the guard cannot know
// its topic, and without this any account could read every topic's
// messages by offset. It needs SUB on the message's topic; a delayed or
// timed message waits in the broker's own topic for the real topic it
// is delivered to, so it counts as that topic's. A transaction half
// (undecided or rolled back) and an op record are delivered nowhere and
// stay in the broker's own topics, so, like a message stored with the
// prepared or rollback sysFlag, they need an admin account. nil means
// allowed.
func (c *Controller) aclStoredMessage(conn *remoting.Conn, req *remoting.RemotingCommand, m *wire.Message) *remoting.RemotingCommand {
	if c.acl == nil {
		return nil
	}
	topic := m.Topic
	if real := m.Properties[wire.PropertyRealTopic]; real != "" && (topic == wire.TopicSchedule || topic == wire.TopicTimer) {
		topic = real
	}
	return c.aclCheck(conn, req, []acl.Resource{{Name: topic, Perm: acl.Sub}}, uncommittedTransaction(m.SysFlag))
}

// aclHalfTopic checks, with aclEnable, that an END_TRANSACTION's account
// may publish to the real topic of the half it decides: a commit writes
// the message there and a rollback decides it away, and the topic the
// header names (checked by the guard, as RocketMQ 5 does) is the
// client's word, not the half's. nil means allowed.
func (c *Controller) aclHalfTopic(conn *remoting.Conn, req *remoting.RemotingCommand, half *store.Message) *remoting.RemotingCommand {
	if c.acl == nil {
		return nil
	}
	topic := half.Properties[wire.PropertyRealTopic]
	if topic == "" {
		// A half that names no topic is decided by an admin only.
		return c.aclCheck(conn, req, nil, true)
	}
	return c.aclCheck(conn, req, []acl.Resource{{Name: topic, Perm: acl.Pub}}, false)
}

// aclCheck checks req, with the resources the request names plus extra,
// against the rules in force; admin asks for an admin account whatever
// the request.
func (c *Controller) aclCheck(conn *remoting.Conn, req *remoting.RemotingCommand, extra []acl.Resource, admin bool) *remoting.RemotingCommand {
	remote := ""
	if conn != nil {
		remote = conn.RemoteAddr()
	}
	q, err := aclRequest(remote, req)
	q.Resources = append(q.Resources, extra...)
	q.Admin = q.Admin || admin
	// The broker's own topics hold other topics' messages (delayed,
	// timed, uncommitted halves), so reading one needs an admin account,
	// whatever an account's defaultTopicPerm grants; extra is included,
	// as a stored message's topic may be one of them.
	for _, r := range q.Resources {
		if r.Perm == acl.Sub && isSystemTopic(r.Name) {
			q.Admin = true
		}
	}
	if err == nil && q.AccessKey != "" && q.AccessKey == c.acl.cluster.AccessKey {
		if q.Verify(c.acl.cluster.SecretKey) {
			return nil
		}
		err = &acl.Denied{Reason: fmt.Sprintf("ACL: signature check failed for the cluster account accessKey=%s (clusterAuthSecretKey differs?)", q.AccessKey)}
	} else if err == nil {
		err = c.acl.Rules().Check(q)
	}
	if err == nil {
		return nil
	}
	var d *acl.Denied
	if !errors.As(err, &d) {
		d = &acl.Denied{Reason: fmt.Sprintf("ACL: request code %d: %v", req.Code, err)}
	}
	c.acl.denied.Inc()
	c.log.Debug("request refused by ACL", zap.Int16("code", req.Code), zap.String("remote", remote), zap.String("why", d.Reason))
	return response(remoting.ResponseNoPermission, "%s", d.Reason)
}

// aclRequest describes req for the rules: its account, signature check,
// whether its code needs an admin account (aclCheck adds the reads of the
// broker's own topics), and the topics and groups it touches with the
// permission each needs. The resources follow RocketMQ's
// PlainAccessValidator.parse, plus batch, reply and lite-pull requests
// and QUERY_CONSUMER_OFFSET, which it does not list but which touch the
// same resources as their siblings, and the queue locks RocketMQ 5 checks
// (DefaultAuthorizationContextBuilder). docs/acl.md tables the rule
// of every code against RocketMQ's.
func aclRequest(remote string, req *remoting.RemotingCommand) (acl.Request, error) {
	q := acl.Request{Code: req.Code, Admin: aclAdminCodes[req.Code]}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		q.Addr, _ = netip.ParseAddr(host)
	}
	q.AccessKey, _ = req.ExtValue(remoting.ExtAccessKey)
	var pairs []remoting.ExtPair
	q.Verify = func(secret string) bool {
		if pairs == nil {
			pairs = remoting.ExtPairs(req)
		}
		return remoting.VerifySignature(req, pairs, secret)
	}
	ext := func(k string) string { v, _ := req.ExtValue(k); return v }
	add := func(name string, p acl.Perm) {
		if name != "" {
			q.Resources = append(q.Resources, acl.Resource{Name: name, Perm: p})
		}
	}
	group := func(g string, p acl.Perm) {
		if g != "" {
			q.Resources = append(q.Resources, acl.GroupResource(g, p))
		}
	}
	// A send to a retry topic is a consumer's resend: SUB on its group.
	send := func(topic string) {
		if len(topic) > len(acl.RetryTopicPrefix) && topic[:len(acl.RetryTopicPrefix)] == acl.RetryTopicPrefix {
			add(topic, acl.Sub)
		} else {
			add(topic, acl.Pub)
		}
	}
	switch req.Code {
	case remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage,
		remoting.RequestSendReplyMessage, remoting.RequestSendReplyMessageV2:
		// The send codes take either header shape (SEND_MESSAGE_V2 and
		// SEND_BATCH_MESSAGE may name the topic "topic" rather than
		// "b"), so the topic is read as the send path reads it; a header
		// it cannot decode is refused there, before anything is written.
		if h, err := decodeSendHeader(asSendRequest(req)); err == nil {
			send(h.Topic)
		} else {
			send(ext("topic"))
			send(ext("b"))
		}
	case remoting.RequestEndTransaction:
		// RocketMQ 5 checks PUB on the topic the header names; the half's
		// real topic is checked once the half is read (aclHalfTopic).
		add(ext("topic"), acl.Pub)
	case remoting.RequestConsumerSendMsgBack:
		group(ext("group"), acl.Sub)
	case remoting.RequestPullMessage, remoting.RequestLitePullMessage:
		add(ext("topic"), acl.Sub)
		group(ext("consumerGroup"), acl.Sub)
	case remoting.RequestQueryMessage:
		add(ext("topic"), acl.Sub)
	case remoting.RequestHeartBeat:
		var hb wire.HeartbeatData
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return q, fmt.Errorf("malformed heartbeat body: %v", err)
		}
		for _, cd := range hb.ConsumerDataSet {
			group(cd.GroupName, acl.Sub)
			for _, sd := range cd.SubscriptionDataSet {
				if sd != nil {
					add(sd.Topic, acl.Sub)
				}
			}
		}
	case remoting.RequestUnregisterClient, remoting.RequestGetConsumerListByGroup:
		group(ext("consumerGroup"), acl.Sub)
	case remoting.RequestUpdateConsumerOffset, remoting.RequestQueryConsumerOffset:
		group(ext("consumerGroup"), acl.Sub)
		add(ext("topic"), acl.Sub)
	case remoting.RequestLockBatchMQ, remoting.RequestUnlockBatchMQ:
		// RocketMQ 5 (DefaultAuthorizationContextBuilder): SUB on the
		// body's group and on each queue's topic; a retry topic's queues
		// are the group's own, covered by the group check.
		var b wire.LockBatchBody
		if err := json.Unmarshal(req.Body, &b); err != nil {
			return q, fmt.Errorf("malformed lock body: %v", err)
		}
		group(b.ConsumerGroup, acl.Sub)
		seen := make(map[string]bool, 1)
		for _, mq := range b.MQSet {
			if !seen[mq.Topic] && !strings.HasPrefix(mq.Topic, acl.RetryTopicPrefix) {
				seen[mq.Topic] = true
				add(mq.Topic, acl.Sub)
			}
		}
	}
	return q, nil
}

// aclAdminCodes need an admin account. RocketMQ 4.9 lists five
// (Permission.ADMIN_CODE: 17, 25, 200, 207, 215), RocketMQ 5's ACL 1.0
// adds the ACL commands 50-52 (and 513, static topics, which raftmq does
// not serve), and RocketMQ 5's ACL 2.0 checks the broker-wide statistics
// and producer listings (315, 317, 204, 328) against the cluster
// resource, which plain_acl.yml grants only to admin accounts. raftmq adds
// every other request that changes broker state not owned by the caller
// or that exposes the broker's configuration or Raft state: topic lists
// and batches, deletes, offset resets, permission wipes, consumer control
// and Raft leadership.
var aclAdminCodes = map[int16]bool{
	remoting.RequestUpdateAndCreateTopic:                 true,
	remoting.RequestUpdateAndCreateTopicList:             true,
	remoting.RequestUpdateBrokerConfig:                   true,
	remoting.RequestGetBrokerConfig:                      true,
	remoting.RequestTriggerDeleteFiles:                   true,
	remoting.RequestUpdateACLConfig:                      true,
	remoting.RequestDeleteACLConfig:                      true,
	remoting.RequestUpdateGlobalWhiteAddrs:               true,
	remoting.RequestGetBrokerACLInfo:                     true,
	remoting.RequestViewBrokerStatsData:                  true,
	remoting.RequestGetBrokerConsumeStats:                true,
	remoting.RequestGetProducerConnectionList:            true,
	remoting.RequestGetAllProducerInfo:                   true,
	remoting.RequestUpdateAndCreateSubscriptionGroup:     true,
	remoting.RequestUpdateAndCreateSubscriptionGroupList: true,
	remoting.RequestDeleteSubscriptionGroup:              true,
	remoting.RequestDeleteTopicInBroker:                  true,
	remoting.RequestWipeWritePermOfBroker:                true,
	remoting.RequestAddWritePermOfBroker:                 true,
	remoting.RequestSuspendConsumer:                      true,
	remoting.RequestResumeConsumer:                       true,
	remoting.RequestResetConsumerOffsetInConsumer:        true,
	remoting.RequestResetConsumerOffsetInBroker:          true,
	remoting.RequestInvokeBrokerToResetOffset:            true,
	remoting.RequestAdjustConsumerThreadPool:             true,
	remoting.RequestConsumeMessageDirectly:               true,
	remoting.RequestCloneGroupOffset:                     true,
	remoting.RequestCleanExpiredConsumequeue:             true,
	remoting.RequestCleanUnusedTopic:                     true,
	remoting.RequestDeleteExpiredCommitLog:               true,
	remoting.RequestRaftStatus:                           true,
	remoting.RequestLeadershipTransfer:                   true,
	remoting.RequestAddRaftMember:                        true,
	remoting.RequestRemoveRaftMember:                     true,
	remoting.RequestCatchupRead:                          true,
}
