package testutil

import (
	"strconv"
	"sync/atomic"

	"go.uber.org/goleak"
)

// officialSeq numbers the official client's instances.
var officialSeq atomic.Int64

// OfficialInstance is a process-unique instance name for the official
// client. The official client keeps one instance per name for the whole process,
// with the name servers of its first use, so a test run twice (-count)
// against a new name server needs a new name.
func OfficialInstance(prefix string) string {
	return prefix + "-" + strconv.FormatInt(officialSeq.Add(1), 10)
}

// OfficialClientGoroutines lists goroutines the official RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2, used by compatibility tests) does
// not stop, for goleak.VerifyTestMain: a go-cache janitor started at package
// init, the timer loops of rmqClient.Start (they sleep up to 10 s before they
// look at the done channel Shutdown closes), the consumer statistics
// samplers (never stopped), the transaction producer's check-back loop
// (it ranges over a channel Shutdown never closes), and push-consumer pulls still waiting for their
// response future, which the client only expires on its own timeout after
// Shutdown, and the trace dispatcher, which spins for 500 ms after
// Shutdown before it returns, and the orderly consumer's loop polling an
// empty process queue with a sleep (processQueue.takeMessages), which
// Shutdown never ends. They are not ours to stop.
func OfficialClientGoroutines() []goleak.Option {
	const mod = "github.com/apache/rocketmq-client-go/v2/"
	opts := []goleak.Option{
		goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"),
		goleak.IgnoreAnyFunction(mod + "internal/remote.(*ResponseFuture).waitResponse"),
		goleak.IgnoreAnyFunction(mod + "consumer.(*pushConsumer).Start.func1.1.1"),
		goleak.IgnoreAnyFunction(mod + "consumer.(*pushConsumer).Start.func1.2"),
		goleak.IgnoreAnyFunction(mod + "consumer.(*pushConsumer).pullMessage"),
		goleak.IgnoreAnyFunction(mod + "consumer.(*pushConsumer).consumeMessageOrderly"),
		goleak.IgnoreAnyFunction(mod + "producer.(*transactionProducer).checkTransactionState"),
		goleak.IgnoreAnyFunction(mod + "internal.(*traceDispatcher).process"),
	}
	for i := 1; i <= 8; i++ {
		opts = append(opts,
			goleak.IgnoreAnyFunction(mod+"internal.(*rmqClient).Start.func1."+strconv.Itoa(i)),
			goleak.IgnoreAnyFunction(mod+"consumer.(*statsItemSet).init.func"+strconv.Itoa(i)))
	}
	return opts
}

// SkipOfficialClientUnderRace skips a test that runs the official client
// when the binary is built with -race. The client has data races of its own
// (its orderly consumer's process queue; Shutdown of its shared client
// instance against goroutines it started, such as a rebalance any
// notification or its 20 s timer triggers), which the detector reports in its
// code and which fail the test. Call it first, before anything is started:
// a skip after the client started still races in its Shutdown at cleanup.
// .ci/run runs these tests once more without -race (-run
// 'TestOfficial|OfficialClient'), so they still run in CI; name them so.
func SkipOfficialClientUnderRace(t interface{ Skip(...any) }) {
	if RaceEnabled {
		t.Skip("upstream data races in rocketmq-client-go; runs in the non-race pass of .ci/run")
	}
}
