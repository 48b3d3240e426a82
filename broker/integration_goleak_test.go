package broker

import (
	"strconv"

	"go.uber.org/goleak"
)

// officialClientGoroutines lists goroutines the official RocketMQ Go client
// does not stop: a go-cache janitor started at package init, and the timer
// loops of rmqClient.Start, which sleep up to 10 s before they look at the
// done channel Shutdown closes. The package's TestMain passes them to
// goleak.VerifyTestMain.
func officialClientGoroutines() []goleak.Option {
	opts := []goleak.Option{goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run")}
	for i := 1; i <= 8; i++ {
		opts = append(opts, goleak.IgnoreAnyFunction(
			"github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1."+strconv.Itoa(i)))
	}
	return opts
}
