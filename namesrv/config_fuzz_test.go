package namesrv

import (
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

// FuzzNamesrvConfigFile: a namesrv.conf of any bytes loads and validates to
// a config or an error, never a panic; a config that passes prints (-p,
// GET_NAMESRV_CONFIG) as a file that loads back to the same settings.
func FuzzNamesrvConfigFile(f *testing.F) {
	f.Add([]byte("listenPort=9876\nkvConfigPath=/var/lib/raftmq/namesrv/kvConfig.json\ngossipEnable=true\nmetricsPort=0\n"))
	f.Add([]byte("listenPort=0\ngossipEnable=true\ngossipSecretKey=AAAAAAAAAAAAAAAAAAAAAA==\ngossipBindPort=1\ntlsServerMode=permissive\n"))
	f.Add([]byte("scanNotActiveBrokerInterval=5s\nbrokerChannelExpiredTime=120000\norderMessageEnable=true\n=x\nrocketmqHome=/opt\n"))
	f.Add([]byte("kvConfigPath=C\\:\\\\kv\\u0041.json\nlogLevel=debug\nlogFile=/tmp/x.log\n"))
	// `raftmq namesrv -c`'s load: the file over the defaults, then Validate.
	f.Fuzz(func(t *testing.T, data []byte) {
		testutil.CheckConfigFile(t, data, DefaultConfig, (*Config).Validate)
	})
}
