package namesrv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// loadNamesrvConf is `raftmq namesrv -c`'s load: the file over the
// defaults, then Validate.
func loadNamesrvConf(t *testing.T, data []byte) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "namesrv.conf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if _, err := config.Load(path, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// FuzzNamesrvConfigFile: a namesrv.conf of any bytes loads and validates to
// a config or an error, never a panic; a config that passes prints (-p,
// GET_NAMESRV_CONFIG) as a file that loads back to the same settings.
func FuzzNamesrvConfigFile(f *testing.F) {
	f.Add([]byte("listenPort=9876\nkvConfigPath=/var/lib/raftmq/namesrv/kvConfig.json\ngossipEnable=true\nmetricsPort=0\n"))
	f.Add([]byte("listenPort=0\ngossipEnable=true\ngossipSecretKey=AAAAAAAAAAAAAAAAAAAAAA==\ngossipBindPort=1\ntlsServerMode=permissive\n"))
	f.Add([]byte("scanNotActiveBrokerInterval=5s\nbrokerChannelExpiredTime=120000\norderMessageEnable=true\n=x\nrocketmqHome=/opt\n"))
	f.Add([]byte("kvConfigPath=C\\:\\\\kv\\u0041.json\nlogLevel=debug\nlogFile=/tmp/x.log\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := loadNamesrvConf(t, data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		var printed bytes.Buffer
		if err := config.Print(&printed, &cfg); err != nil {
			t.Fatalf("accepted config does not print: %v", err)
		}
		back, err := loadNamesrvConf(t, printed.Bytes())
		if err != nil {
			t.Fatalf("printed config does not load: %v\n%s", err, printed.Bytes())
		}
		var again bytes.Buffer
		if err := config.Print(&again, &back); err != nil || !bytes.Equal(printed.Bytes(), again.Bytes()) {
			t.Fatalf("config changes through print and load (%v):\n%s\n---\n%s", err, printed.Bytes(), again.Bytes())
		}
	})
}
