package ha

import (
	"bytes"
	"log"

	"go.uber.org/zap"
)

// zapLogWriter turns memberlist's log.Logger lines ("[WARN] memberlist:
// Refuting a suspect message (from: b)") into zap debug entries. memberlist
// is chatty during every failure (failed pings, refutations, suspect
// timeouts) and the membership changes that matter are logged by Gossip
// itself at info level, so its own lines stay at debug; the original level
// is kept in a field for filtering.
type zapLogWriter struct {
	log *zap.Logger
}

func newMemberlistLogger(l *zap.Logger) *log.Logger {
	return log.New(zapLogWriter{log: l.Named("memberlist")}, "", 0)
}

// Write receives exactly one formatted line per call from log.Logger.
func (w zapLogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\r\n")
	level := "INFO"
	if len(line) > 0 && line[0] == '[' {
		if end := bytes.IndexByte(line, ']'); end > 0 {
			level = string(line[1:end])
			line = bytes.TrimLeft(line[end+1:], " ")
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.log.Debug(string(line), zap.String("mlLevel", level))
	return len(p), nil
}
