package remoting

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A server's connections each warn once as they are closed for a fault
// (bad frame, read timeout, a peer that does not read). Those warnings are
// sampled per message: the first connWarnBurst in a second, then one in
// connWarnThereafter, so a flood of garbage connections cannot flood the
// log or its disk. Lower levels (the debug request log) pass as they are.
const (
	connWarnBurst      = 20
	connWarnThereafter = 1000
)

// connLogger wraps a server's logger for its connections.
func connLogger(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		var warns zapcore.Core = zapcore.NewSamplerWithOptions(c, time.Second, connWarnBurst, connWarnThereafter)
		if w, err := zapcore.NewIncreaseLevelCore(warns, zapcore.WarnLevel); err == nil {
			warns = w
		} // else the logger's level is above Warn already
		return zapcore.NewTee(belowCore{c, zapcore.WarnLevel}, warns)
	}))
}

// belowCore passes only entries below a level.
type belowCore struct {
	zapcore.Core
	below zapcore.Level
}

func (b belowCore) Enabled(l zapcore.Level) bool { return l < b.below && b.Core.Enabled(l) }

func (b belowCore) With(fields []zapcore.Field) zapcore.Core {
	return belowCore{b.Core.With(fields), b.below}
}

func (b belowCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !b.Enabled(e.Level) {
		return ce
	}
	return b.Core.Check(e, ce)
}
