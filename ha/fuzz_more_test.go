package ha

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// FuzzGossipKeyring: gossipSecretKey either decodes into a keyring whose
// primary key is the first listed and which holds every listed key, or
// fails with ErrInvalidGossipConfig naming the key.
func FuzzGossipKeyring(f *testing.F) {
	k16 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 16))
	k32 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	for _, s := range []string{"", k16, k16 + " , " + k32, k32 + "," + k16 + "," + k16, "x", k16 + ",", "AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kr, err := GossipConfig{SecretKey: s}.keyring()
		if err != nil {
			if !errors.Is(err, ErrInvalidGossipConfig) || !strings.Contains(err.Error(), "gossipSecretKey") {
				t.Fatalf("error %v does not name gossipSecretKey", err)
			}
			return
		}
		if strings.TrimSpace(s) == "" {
			if kr != nil {
				t.Fatal("keyring from an empty key")
			}
			return
		}
		parts := strings.Split(s, ",")
		first, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(parts[0]))
		if !bytes.Equal(kr.GetPrimaryKey(), first) {
			t.Fatalf("primary key is not the first listed")
		}
		for _, p := range parts {
			k, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(p))
			found := false
			for _, have := range kr.GetKeys() {
				found = found || bytes.Equal(have, k)
			}
			if !found {
				t.Fatalf("key %q missing from the keyring", p)
			}
		}
	})
}
