package ha

import (
	"bytes"
	"log"
	"sync"
	"time"

	"go.uber.org/zap"
)

// zapLogWriter turns memberlist's log.Logger lines ("[WARN] memberlist:
// Refuting a suspect message (from: b)") into zap debug entries. memberlist
// is chatty during every failure (failed pings, refutations, suspect
// timeouts) and the membership changes that matter are logged by Gossip
// itself at info level, so its own lines stay at debug (but those of
// refusedLines, warned of); the original level is kept in a field for
// filtering.
type zapLogWriter struct {
	log *zap.Logger
	// onRefute, when set, is called for each line saying this node refuted
	// a claim about itself. memberlist has no callback for refutations;
	// these lines are the only sign that peers may have declared this node
	// dead, or hold an older record of it.
	onRefute func()
	// refusals rate-limits the warnings of refusedLines.
	refusals *refusalWarnings
}

// refusedLines start the lines memberlist logs when it drops what a
// process outside the pool sent: one with another gossipSecretKey, none,
// or another gossipLabel, or a node claiming a member's name from another
// address. Such a process is never a member, so a name server never hears
// of its death; at debug with the rest, the misconfiguration would show
// only on that process (whose join error may be a bare EOF). Each kind is
// warned of at most once per refusalWarnEvery.
var refusedLines = []struct {
	prefix []byte
	why    string
}{
	{[]byte("discarding stream with unacceptable label"), "another gossipLabel"},
	{[]byte("discarding packet with unacceptable label"), "another gossipLabel"},
	{[]byte("failed to receive: no installed keys could decrypt"), "another gossipSecretKey"},
	{[]byte("Decrypt packet failed"), "another gossipSecretKey, or none"},
	{[]byte("failed to receive: encryption is configured but remote state is not encrypted"), "no gossipSecretKey (this pool has one)"},
	{[]byte("failed to receive: remote state is encrypted and encryption is not configured"), "a gossipSecretKey (this node has none)"},
	{[]byte("Conflicting address for"), "a member's gossipNodeName from another address (a member restarted on a new address is taken once its old one is dead for gossipDeadNodeReclaimTimeMs)"},
}

// refusalWarnEvery is the least time between two warnings of one kind of
// refused gossip: a misconfigured node joins again every
// gossipJoinRetryIntervalMs.
const refusalWarnEvery = time.Minute

// refusalWarnings remembers when each kind of refusal was last warned of
// and how many went unwarned since.
type refusalWarnings struct {
	mu     sync.Mutex
	last   map[string]time.Time
	missed map[string]int
}

// warn reports whether a refusal of kind why is to be warned of now, and
// how many of that kind went unwarned before it.
func (r *refusalWarnings) warn(why string, now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.last[why]; ok && now.Sub(last) < refusalWarnEvery {
		r.missed[why]++
		return false, 0
	}
	if r.last == nil {
		r.last, r.missed = map[string]time.Time{}, map[string]int{}
	}
	n := r.missed[why]
	r.last[why], r.missed[why] = now, 0
	return true, n
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
	return log.New(zapLogWriter{log: l.Named("memberlist"), onRefute: onRefute, refusals: &refusalWarnings{}}, "", 0)
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
				// After the line: a hook on it (a test freezing the
				// node as it refutes) runs before the resync it starts.
				defer w.onRefute()
				break
			}
		}
	}
	for _, r := range refusedLines {
		if !bytes.HasPrefix(line, r.prefix) {
			continue
		}
		if ok, missed := w.refusals.warn(r.why, time.Now()); ok {
			w.log.Warn("gossip from outside the pool refused: "+r.why+"; check gossipSecretKey, gossipLabel and gossipNodeName on that node",
				zap.String("memberlist", string(line)), zap.Int("refusedSinceLastWarning", missed),
				zap.Duration("nextWarningAfter", refusalWarnEvery))
			return len(p), nil
		}
		break
	}
	w.log.Debug(string(line), zap.String("mlLevel", level))
	return len(p), nil
}
