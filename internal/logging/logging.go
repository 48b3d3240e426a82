package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a production-style JSON logger at the given level ("debug",
// "info", "warn", "error"), writing to stderr.
func New(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("logging: bad level %q: want debug, info, warn or error", level)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	// Sampling would drop repeated warnings about the same bad peer, which is
	// what an operator needs to see while chasing it; components already warn
	// once per condition.
	cfg.Sampling = nil
	return cfg.Build()
}
