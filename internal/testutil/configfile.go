package testutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// CheckConfigFile is the property a config-file fuzz target checks: data,
// loaded over newCfg's defaults and checked by check (Derive, Validate), is
// a config or an error with a message, never a panic; and an accepted
// config prints (-p, GET_*_CONFIG) as a file that loads back to the same
// settings.
func CheckConfigFile[T any](t *testing.T, data []byte, newCfg func() T, check func(*T) error) {
	t.Helper()
	load := func(data []byte) (T, error) {
		path := filepath.Join(t.TempDir(), "fuzz.conf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := newCfg()
		// check runs on a partly loaded config too: a panic there is a
		// finding as well.
		_, err := config.Load(path, &cfg)
		return cfg, errors.Join(err, check(&cfg))
	}
	cfg, err := load(data)
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
	back, err := load(printed.Bytes())
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, printed.Bytes())
	}
	var again bytes.Buffer
	if err := config.Print(&again, &back); err != nil || !bytes.Equal(printed.Bytes(), again.Bytes()) {
		t.Fatalf("config changes through print and load (%v):\n%s\n---\n%s", err, printed.Bytes(), again.Bytes())
	}
}
