package client

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Options follow franz-go's kgo: package-level constructors returning
// typed options. An Opt applies to every client type (name servers,
// logger, clock, route refresh); a ProducerOpt only to producers, so the
// compiler rejects a producer option given to something else. Everything
// is validated by the constructor (NewProducer), which names the option
// and the accepted range on failure (errors.Is(err, ErrInvalidOption)).

// commonConfig holds what every client type shares.
type commonConfig struct {
	nameServers          []string
	log                  *zap.Logger
	now                  func() time.Time
	realClock            bool // now is time.Now (no WithClock): its readings double as wall time
	routeRefreshInterval time.Duration
	requestTimeout       time.Duration
	clientIP             net.IP
	instanceName         string
	credentials          remoting.Credentials // WithCredentials (credentials.go)
	tls                  tlsOption            // WithTLS / WithTLSConfig (options_tls.go)
	traceTopic           string               // WithTrace; "" = off
	// leaderFollowWait bounds the wait for a group's new leader of a call
	// whose context has no deadline (leaderWait). Not an option: the
	// package's tests shorten it, so as not to wait out the default.
	leaderFollowWait time.Duration
}

func defaultCommonConfig() commonConfig {
	return commonConfig{
		log:                  zap.NewNop(),
		now:                  time.Now,
		realClock:            true,
		routeRefreshInterval: 30 * time.Second, // pollNameServerInterval
		requestTimeout:       3 * time.Second,
		instanceName:         "DEFAULT",
		leaderFollowWait:     defaultLeaderFollowWait,
	}
}

func (c *commonConfig) validate() error {
	if len(c.nameServers) == 0 {
		return fmt.Errorf("%w: NameServers: at least one name server address (host:port) is required", ErrInvalidOption)
	}
	for _, a := range c.nameServers {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return fmt.Errorf("%w: NameServers: %q is not host:port", ErrInvalidOption, a)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("%w: NameServers: %q has an invalid port", ErrInvalidOption, a)
		}
	}
	if c.clientIP != nil && len(c.clientIP) != net.IPv4len && len(c.clientIP) != net.IPv6len {
		// Every UNIQ_KEY carries it, read back as 4 or 16 bytes.
		return fmt.Errorf("%w: ClientIP %v: want an IPv4 or IPv6 address, not %d bytes", ErrInvalidOption, []byte(c.clientIP), len(c.clientIP))
	}
	if c.routeRefreshInterval < 10*time.Millisecond {
		return fmt.Errorf("%w: RouteRefreshInterval %v: want at least 10ms", ErrInvalidOption, c.routeRefreshInterval)
	}
	if c.requestTimeout <= 0 {
		return fmt.Errorf("%w: RequestTimeout %v: want > 0", ErrInvalidOption, c.requestTimeout)
	}
	if c.log == nil {
		return fmt.Errorf("%w: WithLogger: nil logger (use zap.NewNop())", ErrInvalidOption)
	}
	if c.now == nil {
		return fmt.Errorf("%w: WithClock: nil clock", ErrInvalidOption)
	}
	if c.tls.err != nil {
		return c.tls.err
	}
	return c.validateCredentials()
}

// innerProducer is the option that makes a producer a client runs for
// itself (the push consumer's send-back producer, the trace producer)
// connect as its owner does: same name servers, timeouts, credentials and
// TLS, so that it works wherever its owner does, as RocketMQ's inner
// producers do by sharing their owner's client instance. It has its own
// client id, though: it heartbeats on its own connections, and the broker
// routes a reply to the connection that last heartbeated its requester's
// id. Its sends are not traced.
func innerProducer(owner commonConfig) ProducerOpt {
	return producerOpt(func(c *producerConfig) {
		c.common = owner
		c.common.nameServers = append([]string(nil), owner.nameServers...)
		c.common.instanceName = defaultCommonConfig().instanceName
		c.common.traceTopic = ""
	})
}

// Opt is an option every client type accepts.
type Opt interface {
	ProducerOpt
	ConsumerOpt
	applyCommon(*commonConfig)
}

// ProducerOpt is an option for NewProducer.
type ProducerOpt interface {
	applyProducer(*producerConfig)
}

type commonOpt func(*commonConfig)

func (o commonOpt) applyCommon(c *commonConfig)     { o(c) }
func (o commonOpt) applyProducer(c *producerConfig) { o(&c.common) }
func (o commonOpt) applyConsumer(c *consumerConfig) { o(&c.common) }

type producerOpt func(*producerConfig)

func (o producerOpt) applyProducer(c *producerConfig) { o(c) }

// NameServers sets the name server addresses ("host:port"). Lookups start
// with the one that answered last and move on when one is unreachable.
// Required.
func NameServers(addrs ...string) Opt {
	return commonOpt(func(c *commonConfig) { c.nameServers = append([]string(nil), addrs...) })
}

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(l *zap.Logger) Opt { return commonOpt(func(c *commonConfig) { c.log = l }) }

// WithClock replaces time.Now for fault isolation windows, UNIQ_KEY time
// fields and route ages; tests use it to move time.
func WithClock(now func() time.Time) Opt {
	return commonOpt(func(c *commonConfig) { c.now, c.realClock = now, false })
}

// RouteRefreshInterval sets how often cached routes are refreshed from the
// name servers (default 30 s, RocketMQ's pollNameServerInterval).
func RouteRefreshInterval(d time.Duration) Opt {
	return commonOpt(func(c *commonConfig) { c.routeRefreshInterval = d })
}

// RequestTimeout bounds one request to a name server or broker that has no
// deadline of its own (route lookups, heartbeats, offset commits and
// queries, a batch's send-backs together; default 3 s). A send's deadline
// is SendTimeout.
func RequestTimeout(d time.Duration) Opt {
	return commonOpt(func(c *commonConfig) { c.requestTimeout = d })
}

// ClientIP sets the address written into UNIQ_KEY (default: the first
// non-loopback IPv4 address).
func ClientIP(ip net.IP) Opt { return commonOpt(func(c *commonConfig) { c.clientIP = ip }) }

// InstanceName sets the instance part of the client id (default "DEFAULT").
func InstanceName(name string) Opt { return commonOpt(func(c *commonConfig) { c.instanceName = name }) }

// producerConfig is the producer's validated configuration.
type producerConfig struct {
	common                commonConfig
	group                 string
	sendTimeout           time.Duration
	retries               int
	compressOver          int
	compressLevel         int
	maxMessageSize        int
	faultEnable           bool
	latencyMax            []time.Duration
	notAvailable          []time.Duration
	autoCreate            bool
	defaultTopicQueueNums int
	idempotent            bool
	producerID            string
	maxAsyncInflight      int
	maxLeaderHops         int
	serializeType         remoting.SerializeType
	attemptTimeout        time.Duration
	autoBatch             autoBatchConfig
}

// DefaultProducerGroup is DefaultMQProducer's default group name.
const DefaultProducerGroup = "DEFAULT_PRODUCER"

func defaultProducerConfig() producerConfig {
	return producerConfig{
		common:                defaultCommonConfig(),
		group:                 DefaultProducerGroup,
		sendTimeout:           3 * time.Second,
		retries:               2,
		compressOver:          4 << 10,
		compressLevel:         5,
		maxMessageSize:        DefaultMaxMessageSize,
		latencyMax:            defaultLatencyMax,
		notAvailable:          defaultNotAvailableDuration,
		autoCreate:            true,
		defaultTopicQueueNums: 4,
		maxAsyncInflight:      10000,
		maxLeaderHops:         3,
		serializeType:         remoting.SerializeRocketMQ,
		attemptTimeout:        DefaultAttemptTimeout,
		autoBatch:             autoBatchConfig{inflight: defaultAutoBatchInflight},
	}
}

// DefaultAttemptTimeout bounds one send attempt (all but the last) unless
// AttemptTimeout says otherwise. Without a bound a frozen leader (SIGSTOP,
// a long pause) that keeps its TCP connection open holds every send for the
// whole SendTimeout although a new leader is elected in well under a second
// (found by the chaos suite). An attempt that times out is retried, so a
// producer without the Idempotent option may store a copy twice — RocketMQ's
// at-least-once contract; enable Idempotent to rule that out.
const DefaultAttemptTimeout = time.Second

func (c *producerConfig) validate() error {
	if err := c.common.validate(); err != nil {
		return err
	}
	if !validGroup(c.group, wire.MaxGroupLength) {
		return fmt.Errorf("%w: ProducerGroup %q: want 1..%d characters of %%|a-zA-Z0-9_-", ErrInvalidOption, c.group, wire.MaxGroupLength)
	}
	if c.sendTimeout <= 0 {
		return fmt.Errorf("%w: SendTimeout %v: want > 0", ErrInvalidOption, c.sendTimeout)
	}
	if c.retries < 0 || c.retries > 16 {
		return fmt.Errorf("%w: RetryTimesWhenSendFailed %d: want 0..16", ErrInvalidOption, c.retries)
	}
	if c.compressOver < 0 {
		return fmt.Errorf("%w: CompressBodyOver %d: want >= 0", ErrInvalidOption, c.compressOver)
	}
	if c.compressLevel < -1 || c.compressLevel > 9 {
		return fmt.Errorf("%w: CompressLevel %d: want -1..9", ErrInvalidOption, c.compressLevel)
	}
	if c.maxMessageSize <= 0 || c.maxMessageSize > 15<<20 {
		return fmt.Errorf("%w: MaxMessageSize %d: want 1..%d (a frame is at most 16 MiB)", ErrInvalidOption, c.maxMessageSize, 15<<20)
	}
	if err := validateLatencyTables(c.latencyMax, c.notAvailable); err != nil {
		return err
	}
	if c.defaultTopicQueueNums <= 0 || c.defaultTopicQueueNums > 1024 {
		return fmt.Errorf("%w: AutoCreateTopic queue count %d: want 1..1024", ErrInvalidOption, c.defaultTopicQueueNums)
	}
	if c.maxAsyncInflight <= 0 {
		return fmt.Errorf("%w: MaxAsyncInflight %d: want > 0", ErrInvalidOption, c.maxAsyncInflight)
	}
	if c.maxLeaderHops < 0 || c.maxLeaderHops > 16 {
		return fmt.Errorf("%w: MaxLeaderHops %d: want 0..16", ErrInvalidOption, c.maxLeaderHops)
	}
	if c.attemptTimeout < 0 {
		return fmt.Errorf("%w: AttemptTimeout %v: want >= 0", ErrInvalidOption, c.attemptTimeout)
	}
	if c.serializeType != remoting.SerializeJSON && c.serializeType != remoting.SerializeRocketMQ {
		return fmt.Errorf("%w: SendHeaderSerialization %v: want JSON or ROCKETMQ", ErrInvalidOption, c.serializeType)
	}
	if ab := c.autoBatch; ab.maxMessages < 0 || ab.maxMessages > 4096 {
		return fmt.Errorf("%w: AutoBatch maxMessages %d: want 0..4096 (0 and 1 turn batching off)", ErrInvalidOption, ab.maxMessages)
	}
	if ab := c.autoBatch; ab.maxMessages > 1 {
		if ab.maxBytes <= 0 || ab.maxBytes > c.maxMessageSize {
			return fmt.Errorf("%w: AutoBatch maxBytes %d: want 1..MaxMessageSize (%d)", ErrInvalidOption, ab.maxBytes, c.maxMessageSize)
		}
		if ab.linger < 0 || ab.linger > 10*time.Second {
			return fmt.Errorf("%w: AutoBatch linger %v: want 0..10s", ErrInvalidOption, ab.linger)
		}
	}
	if c.autoBatch.inflight < 1 || c.autoBatch.inflight > 1024 {
		return fmt.Errorf("%w: AutoBatchInflight %d: want 1..1024", ErrInvalidOption, c.autoBatch.inflight)
	}
	if c.producerID != "" && !c.idempotent {
		return fmt.Errorf("%w: IdempotentProducerID is set but Idempotent is off", ErrInvalidOption)
	}
	return nil
}

// ProducerGroup sets the producer group (default "DEFAULT_PRODUCER").
func ProducerGroup(name string) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.group = name })
}

// SendTimeout bounds one SendSync/SendBatch, all retries included, when
// its context has no deadline (default 3 s, sendMsgTimeout); a context's
// deadline, later or earlier, bounds the send instead.
func SendTimeout(d time.Duration) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.sendTimeout = d })
}

// RetryTimesWhenSendFailed sets how many times a failed synchronous send
// is retried, each time avoiding the broker that just failed (default 2).
func RetryTimesWhenSendFailed(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.retries = n })
}

// CompressBodyOver sets the body size above which bodies are sent
// zlib-compressed with sysFlag 0x1 (default 4096, compressMsgBodyOverHowmuch).
func CompressBodyOver(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.compressOver = n })
}

// CompressLevel sets the zlib level, -1..9 (default 5, as RocketMQ).
func CompressLevel(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.compressLevel = n })
}

// MaxMessageSize sets the largest body accepted (default 4 MiB).
func MaxMessageSize(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.maxMessageSize = n })
}

// SendLatencyFaultEnable turns on latency fault tolerance (RocketMQ's
// sendLatencyFaultEnable, off by default): a broker whose sends were slow
// or failed is not chosen until its window passes, unless every broker is
// in that state.
func SendLatencyFaultEnable(on bool) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.faultEnable = on })
}

// SendLatencyFaultTables replaces the latency steps and isolation windows
// (defaults {50ms,100ms,550ms,1s,2s,3s,15s} → {0,0,30s,60s,120s,180s,600s}).
func SendLatencyFaultTables(latencyMax, notAvailable []time.Duration) ProducerOpt {
	return producerOpt(func(c *producerConfig) {
		c.latencyMax = append([]time.Duration(nil), latencyMax...)
		c.notAvailable = append([]time.Duration(nil), notAvailable...)
	})
}

// AutoCreateTopic controls sending to topics the name servers do not know
// (default on, 4 queues): the route of TBW102 stands in, and a broker with
// autoCreateTopicEnable creates the topic on first send.
func AutoCreateTopic(on bool, queueNums int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.autoCreate, c.defaultTopicQueueNums = on, queueNums })
}

// Idempotent makes every message carry a producer id and a per-queue
// sequence number (wire.PropertyProducerID, wire.PropertySequence) that raftmq
// brokers use to drop the second copy a retry after an unknown outcome
// would otherwise store. Retries of an idempotent send stay on the
// message's queue (following its group's leader) so the copy lands where
// the dedup table can see it. A broker remembers a window of sequence
// numbers per queue (raftDedupWindow, 1024 by default); a send whose
// number falls below it (more that many later sends to its queue were
// stored first, as a failover's reordered retries can do with many sends
// in flight) is refused with SYSTEM_ERROR, since the broker cannot tell a
// first send from an old retry: keep fewer idempotent sends per queue in
// flight than the window.
func Idempotent(on bool) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.idempotent = on })
}

// IdempotentProducerID fixes the producer id instead of a random one; two
// live producers must never share one. A producer restarted with the id
// continues its predecessor's streams (its sequence numbers start at its
// creation time), so the system clock must not step back between them.
// Treat it as a secret: brokers store only its digest, so whoever knows
// the id itself can send into this producer's dedup streams.
func IdempotentProducerID(id string) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.producerID = id })
}

// MaxAsyncInflight bounds SendAsync calls whose callback has not returned
// yet (default 10000): a send holds its slot until its callback ran, so
// slow callbacks slow SendAsync down instead of queueing without bound.
// A callback blocked for a few milliseconds gives its slot back early (at
// most a handful at once), so one that itself calls SendAsync cannot
// deadlock. Beyond the bound SendAsync waits for a slot until its context
// ends.
func MaxAsyncInflight(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.maxAsyncInflight = n })
}

// MaxLeaderHops bounds how many times one attempt follows a "not leader,
// ask X" answer or tries another member of the same group after a
// connection failure (default 3). Following a leader does not use up a
// retry.
func MaxLeaderHops(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.maxLeaderHops = n })
}

// SendHeaderSerialization chooses how send request headers are encoded:
// remoting.SerializeRocketMQ (the default), RocketMQ's compact binary
// header, which every RocketMQ 4.x/5.x broker and raftmq decode and which
// spares both sides a JSON parse per message (the larger share of a send's
// CPU in our measurements), or remoting.SerializeJSON, what the official
// Go client sends. Brokers answer in the type of the request.
func SendHeaderSerialization(t remoting.SerializeType) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.serializeType = t })
}

// AttemptTimeout bounds each attempt of a send but the last, so that a
// broker that stopped answering (a frozen or partitioned leader, where no
// connection reset arrives) leaves time for a retry elsewhere within
// SendTimeout (RocketMQ 5's sendMsgMaxTimeoutPerRequest). The default is
// DefaultAttemptTimeout; 0 gives every attempt what is left of the send's
// deadline.
func AttemptTimeout(d time.Duration) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.attemptTimeout = d })
}

// AutoBatch makes concurrent sends of one topic share requests (RocketMQ
// 5's producer autoBatch, Kafka's record batching); off by default, as in
// RocketMQ. Each topic gets AutoBatchInflight request slots. A SendSync or
// SendAsync that finds a slot free goes out alone at once (after linger,
// when linger > 0: then it waits up to linger for others to join); one
// that finds every slot busy waits, and when a request returns the
// waiting messages go together as one SEND_BATCH_MESSAGE of at most
// maxMessages messages and maxBytes (bodies, properties and framing; it
// must stay below the brokers' maxMessageSize). With linger 0 batching
// adds no latency to an idle producer and saves broker work (one request,
// one replicated log entry for many messages) when it is busy.
//
// Every caller still gets its own SendResult (MsgID = its UNIQ_KEY,
// its own OffsetMsgID and QueueOffset; a batch is stored consecutively
// in one queue) and its own error: a failed batch request counts as
// the first attempt of each of its messages, which then retry alone
// under the normal policy; a batch refused as such (MESSAGE_ILLEGAL:
// above a broker's maxBatchMessages or maxMessageSize, or holding a
// message no request may carry) stored nothing, and its messages go
// alone with all their attempts, so one bad message fails only its own
// send. Idempotent sends are batched too (each message keeps its own
// sequence number; a retry goes alone to the same queue). Messages
// that cannot share a request go alone as before: delayed and timer
// messages (by field or property), retry-topic sends, bodies
// compressed (above CompressBodyOver), messages that alone exceed
// maxBytes, SendWithSelector, SendOneway and SendBatch. With linger 0
// a send waits only while a request is in flight, plus at most 1 ms
// right after a batch of several messages returned, for the callers it
// released (closed-loop senders would otherwise split into two
// half-size batches for good).
//
// maxMessages 0 or 1 turns batching off; maxBytes must be at most
// MaxMessageSize; linger at most 10 s.
func AutoBatch(maxMessages, maxBytes int, linger time.Duration) ProducerOpt {
	return producerOpt(func(c *producerConfig) {
		c.autoBatch.maxMessages, c.autoBatch.maxBytes, c.autoBatch.linger = maxMessages, maxBytes, linger
	})
}

// AutoBatchInflight sets how many requests of one topic AutoBatch lets be
// in flight at once (default 2, 1..1024). One leaves the broker idle while
// an answer travels back; many make batches small.
func AutoBatchInflight(n int) ProducerOpt {
	return producerOpt(func(c *producerConfig) { c.autoBatch.inflight = n })
}
