package ha

import (
	"encoding/base64"
	"strings"

	"github.com/hashicorp/memberlist"
)

// keyring decodes gossipSecretKey into memberlist's keyring (nil when
// unset). With a keyring memberlist encrypts every UDP and TCP message and
// drops what does not decrypt (GossipVerifyIncoming), so a process without
// the key can neither join the pool nor inject alive, dead or leave
// messages about real members.
func (c GossipConfig) keyring() (*memberlist.Keyring, error) {
	if strings.TrimSpace(c.SecretKey) == "" {
		return nil, nil
	}
	var keys [][]byte
	for i, s := range strings.Split(c.SecretKey, ",") {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return nil, invalid("gossipSecretKey", "key %d is not base64: %v", i+1, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, invalid("gossipSecretKey", "key %d decodes to %d bytes, want 16, 24 or 32 (AES-128/192/256)", i+1, n)
		}
		keys = append(keys, k)
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, invalid("gossipSecretKey", "%v", err)
	}
	return kr, nil
}
