package broker

import (
	"crypto/tls"
	"fmt"

	"github.com/raftmq/raftmq/remoting"
)

// remotingTLS builds the TLS settings of the broker's remoting listeners
// (both the main and the VIP channel) and of its links to the name servers
// from the tls* keys.
func (c *BrokerConfig) remotingTLS() (mode remoting.TLSMode, server, nsClient *tls.Config, err error) {
	mode, server, err = c.TLS.ServerTLS()
	if err == nil {
		nsClient, err = c.TLS.ClientTLS()
	}
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err)
	}
	return mode, server, nsClient, nil
}
