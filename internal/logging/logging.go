package logging

import (
	"go.uber.org/zap"
)

// New returns a JSON logger at the given level ("debug", "info", "warn",
// "error"), writing to stderr: Open with the default config at that level.
func New(level string) (*zap.Logger, error) {
	c := DefaultConfig()
	c.Level = level
	l, err := Open(c)
	if err != nil {
		return nil, err
	}
	return l.Logger, nil
}
