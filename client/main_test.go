package client

import (
	"strconv"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The official client (used by the comparison benchmark) logs every
	// route refresh at info level.
	rlog.SetLogLevel("error")
	goleak.VerifyTestMain(m, officialClientGoroutines()...)
}

// officialClientGoroutines lists goroutines the official RocketMQ Go client
// leaves behind after Shutdown (a go-cache janitor started at package init
// and rmqClient.Start's timer loops, which sleep before checking their done
// channel). They are not ours to stop; only the comparison benchmark
// starts that client.
func officialClientGoroutines() []goleak.Option {
	opts := []goleak.Option{goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run")}
	for i := 1; i <= 5; i++ {
		opts = append(opts, goleak.IgnoreAnyFunction(
			"github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1."+strconv.Itoa(i)))
	}
	// The official push consumer (consume benchmark) leaves its stats
	// timers and the pull goroutines blocked in a long poll after Shutdown.
	for _, f := range []string{"(*statsItemSet).init.func1", "(*statsItemSet).init.func2", "(*statsItemSet).init.func3",
		"(*statsItemSet).init.func4", "(*statsItemSet).init.func5", "(*statsItemSet).init.func6",
		"(*pushConsumer).Start.func1.1.1", "(*pushConsumer).Start.func1.2", "(*pushConsumer).pullMessage"} {
		opts = append(opts, goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer."+f))
	}
	return opts
}
