package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrIgnoredKey is wrapped by the error for a key the target lists as
// ignored (see Ignorer) when it cannot be accepted: a value that asks for a
// feature raftmq does not have (enableLmq=true), or any value given at run
// time through Apply.
var ErrIgnoredKey = errors.New("key not used by raftmq")

// Ignorer is implemented by a config struct that accepts keys it has no
// field for: RocketMQ keys whose job raftmq does differently (brokerRole:
// replication is Raft) or not at all. Fields win over this list, so a key
// that later gets a field is simply used.
type Ignorer interface {
	// IgnoredKeys maps each ignored key to why it is ignored.
	IgnoredKeys() map[string]Ignored
}

// Ignored says why a key is ignored and which values are safe to ignore.
type Ignored struct {
	// Reason says why raftmq does not need the key ("replication is Raft").
	Reason string
	// Only, when set, is the one value (compared case-insensitively) that is
	// safe to ignore, because it asks for nothing raftmq lacks; any other
	// value is refused, so a setting that turns on a feature raftmq lacks
	// (enableLmq=true) cannot pass unnoticed.
	Only string
	// OnlyEmpty accepts only an empty value (a path list or a plug-in class
	// name that would ask for something raftmq lacks).
	OnlyEmpty bool
}

// Refuse returns why value cannot be ignored, or "" when it can.
func (ig Ignored) Refuse(value string) string {
	switch {
	case ig.OnlyEmpty && value != "":
		return ig.Reason + "; only an empty value (or leaving the key out) is accepted"
	case ig.Only != "" && !strings.EqualFold(value, ig.Only):
		return fmt.Sprintf("%s; only the value %s (or leaving the key out) is accepted", ig.Reason, ig.Only)
	}
	return ""
}

// IgnoredKey is one ignored key a file set.
type IgnoredKey struct {
	Key, Value, Reason string
}

// Report is what Load learned beyond the fields it set.
type Report struct {
	// Source is the file name.
	Source string
	// Ignored lists the ignored keys the file set, sorted by key.
	Ignored []IgnoredKey
	// NoKey lists the file's lines that give a value with no key
	// ("=value"), in file order.
	NoKey []NoKeyLine
}

// NoKeyLine is a line of a file that gives a value with no key.
type NoKeyLine struct {
	Line  int
	Value string
}

// Warning is the one line to log for the ignored keys and the lines with
// no key ("" when none): keys grouped by reason, reasons in the order of
// their first key, so that a stock RocketMQ file gives one readable line
// instead of one per key.
func (r Report) Warning() string {
	if len(r.NoKey) > 0 {
		lines := make([]string, len(r.NoKey))
		for i, l := range r.NoKey {
			lines[i] = fmt.Sprintf("line %d (=%s)", l.Line, l.Value)
		}
		w := fmt.Sprintf("%s: %s: a value with no key, ignored as RocketMQ ignores it", r.Source, strings.Join(lines, ", "))
		if len(r.Ignored) > 0 {
			w += "; " + strings.TrimPrefix(Report{Source: r.Source, Ignored: r.Ignored}.Warning(), r.Source+": ")
		}
		return w
	}
	if len(r.Ignored) == 0 {
		return ""
	}
	var reasons []string
	byReason := map[string][]string{}
	for _, k := range r.Ignored {
		if _, seen := byReason[k.Reason]; !seen {
			reasons = append(reasons, k.Reason)
		}
		byReason[k.Reason] = append(byReason[k.Reason], k.Key)
	}
	parts := make([]string, len(reasons))
	for i, why := range reasons {
		parts[i] = strings.Join(byReason[why], ", ") + " (" + why + ")"
	}
	return fmt.Sprintf("%s: %d RocketMQ key(s) accepted but ignored: %s", r.Source, len(r.Ignored), strings.Join(parts, "; "))
}

// IgnoredKeysOf lists the ignored keys dst declares, sorted ("" when dst is
// not an Ignorer), for documentation and tests.
func IgnoredKeysOf(dst any) []string {
	ig, ok := dst.(Ignorer)
	if !ok {
		return nil
	}
	m := ig.IgnoredKeys()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// suggest returns the known key closest to an unknown one, "" when none is
// close enough to be a misspelling: an edit distance, ignoring case, of at
// most a third of the key's length (at least 2). Ties go to the first key in
// sorted order, so the suggestion is deterministic.
func suggest[V any](key string, fields map[string]V, ignored map[string]Ignored) string {
	cands := make([]string, 0, len(fields)+len(ignored))
	for k := range fields {
		cands = append(cands, k)
	}
	for k := range ignored {
		cands = append(cands, k)
	}
	sort.Strings(cands)
	lk := strings.ToLower(key)
	best, bestDist := "", max(len(key)/3, 2)+1
	for _, k := range cands {
		if d := editDistance(lk, strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes (keys
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Explain turns the error of Load, Apply or a Validate into one message
// that lists every problem on its own line under a count, so an operator
// fixes a file in one pass. A single problem is returned as it is. The
// result wraps err (errors.Is and errors.As still see every part).
func Explain(source string, err error) error {
	leaves := Problems(err)
	if len(leaves) < 2 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d settings to change:", source, len(leaves))
	for _, e := range leaves {
		b.WriteString("\n  - ")
		b.WriteString(e.Error())
	}
	return &explained{msg: b.String(), err: err}
}

type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// Problems flattens errors.Join trees into their parts, in order (nil for
// a nil error).
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []error{err}
}
