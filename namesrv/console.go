package namesrv

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/raftmq/raftmq/remoting"
)

// ConsoleConfig holds the keys of the web console that package console
// serves on this name server's monitoring port. The name server only
// carries them: it cannot import the console (which asks brokers through
// the SDK's admin client), so the raftmq command mounts it.
type ConsoleConfig struct {
	// ConsoleEnable serves the console (/console/ and /api/) on the
	// monitoring port (on by default; off when metricsPort is -1).
	ConsoleEnable bool `prop:"consoleEnable"`
	// ConsoleAccessKey and ConsoleSecretKey are the console's admin
	// account: an account with admin: true in the brokers' plain_acl.yml
	// (or their cluster account). The console signs its requests to
	// brokers with it, and its actions (leadership transfer, balance
	// leaders, message lookup) need an HTTP request authenticated with
	// the same pair. Unset, the console refuses every action.
	ConsoleAccessKey string `prop:"consoleAccessKey"`
	ConsoleSecretKey string `prop:"consoleSecretKey"`
	// ConsoleAllowedHosts is a comma-separated list of the names the
	// console may be reached by besides localhost, an IP address and
	// metricsBindAddr ("*": any); a request naming another Host is
	// refused, which stops DNS-rebinding pages.
	ConsoleAllowedHosts string `prop:"consoleAllowedHosts"`
}

// AllowedHosts splits ConsoleAllowedHosts.
func (c ConsoleConfig) AllowedHosts() []string {
	var out []string
	for _, h := range strings.Split(c.ConsoleAllowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// redactedSecret replaces secret values in GET_NAMESRV_CONFIG's answer,
// which any client may ask for.
const redactedSecret = "******"

// redactSecrets blanks the secrets of a config about to be shown.
func (c *Config) redactSecrets() {
	if c.ConsoleSecretKey != "" {
		c.ConsoleSecretKey = redactedSecret
	}
	if c.ClusterAuthSecretKey != "" {
		c.ClusterAuthSecretKey = redactedSecret
	}
	c.Gossip.Redact(redactedSecret)
}

// validate refuses half an account, and, when the console is served,
// keys the brokers' ACL would not take (the account is one of theirs): as
// short, they are guessable. Unserved, the keys guard nothing, and a
// configuration that left them set after turning the console off starts
// as it did.
func (c ConsoleConfig) validate() error {
	if !c.ConsoleEnable && (c.ConsoleAccessKey == "") == (c.ConsoleSecretKey == "") {
		return nil
	}
	cr := remoting.Credentials{AccessKey: c.ConsoleAccessKey, SecretKey: c.ConsoleSecretKey}
	if err := cr.CheckConfigured("consoleAccessKey", "consoleSecretKey"); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

// Config returns the configuration the name server was built with.
func (n *NameServer) Config() Config { return n.cfg }

// HandleHTTP serves h under pattern on the monitoring port next to
// /metrics (the web console). It reports false when the monitoring port
// is off (metricsPort=-1, or an ephemeral listen port without one).
func (n *NameServer) HandleHTTP(pattern string, h http.Handler) bool {
	if n.mon == nil {
		return false
	}
	n.mon.Handle(pattern, h)
	return true
}
