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
	// onRefute, when set, is called for each line saying this node refuted
	// a claim about itself. memberlist has no callback for refutations;
	// these lines are the only sign that peers may have declared this node
	// dead, or hold an older record of it.
	onRefute func()
}

// refuteLines start the lines memberlist logs when this node refutes a
// claim about itself: being suspect or dead (a node its peers declared
// dead often hears of it as a suspicion: a push/pull merge turns a remote
// "dead" into "suspect"), or alive with another incarnation or meta (a
// restarted node meeting its earlier process's record). Each raises the
// node's incarnation; until its peers hear of that, they may declare the
// old one dead, which the node would then ignore (resyncLoop).
var refuteLines = [][]byte{[]byte("Refuting a suspect message"), []byte("Refuting a dead message"),
	[]byte("Refuting an alive message")}

func newMemberlistLogger(l *zap.Logger) *log.Logger {
	return newMemberlistLoggerRefute(l, nil)
}

// newMemberlistLoggerRefute is newMemberlistLogger that also calls
// onRefute (if not nil) whenever this node refutes being suspect or dead.
func newMemberlistLoggerRefute(l *zap.Logger, onRefute func()) *log.Logger {
	return log.New(zapLogWriter{log: l.Named("memberlist"), onRefute: onRefute}, "", 0)
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
	if w.onRefute != nil {
		for _, p := range refuteLines {
			if bytes.HasPrefix(line, p) {
				w.onRefute()
				break
			}
		}
	}
	w.log.Debug(string(line), zap.String("mlLevel", level))
	return len(p), nil
}
