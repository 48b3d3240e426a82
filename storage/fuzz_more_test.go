package storage

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseFileName: a segment file name is its start offset in exactly
// 20 decimal digits; anything else in a queue's directory is not a
// segment, and every offset a queue can name parses back.
func FuzzParseFileName(f *testing.F) {
	for _, s := range []string{FileName(0), FileName(1 << 30), "99999999999999999999", "0000000000000000000a", "+0000000000000000001", "1"} {
		f.Add(s, int64(1<<30))
	}
	f.Fuzz(func(t *testing.T, name string, off int64) {
		if off >= 0 {
			if got, ok := parseFileName(FileName(off)); !ok || got != off {
				t.Fatalf("FileName(%d) = %q parses as %d, %v", off, FileName(off), got, ok)
			}
		}
		got, ok := parseFileName(name)
		if !ok {
			return
		}
		if got < 0 || FileName(got) != name {
			t.Fatalf("%q parses as %d, which names %q", name, got, FileName(got))
		}
	})
}

// FuzzTempTarget: a name is taken for a leftover temporary file only if it
// is exactly one WriteFileAtomic writes (target, ".tmp.", a uint64 in
// base 36 as strconv formats it), and every such name is.
func FuzzTempTarget(f *testing.F) {
	for _, s := range []string{FileName(0) + ".tmp.3k9z1", "checkpoint.tmp.0", "a.tmp.ABC", "a.tmp.00", ".tmp.1", "a.tmp.", "a.tmp.3w5e11264sgsg"} {
		f.Add(s, "checkpoint", uint64(42))
	}
	f.Fuzz(func(t *testing.T, name, target string, v uint64) {
		if target != "" {
			tmp := target + tempInfix + strconv.FormatUint(v, 36)
			if got, ok := tempTarget(tmp); !ok || got != target {
				t.Fatalf("%q: target %q, %v; want %q", tmp, got, ok, target)
			}
		}
		got, ok := tempTarget(name)
		if !ok {
			return
		}
		suffix := strings.TrimPrefix(name, got+tempInfix)
		n, err := strconv.ParseUint(suffix, 36, 64)
		if got == "" || err != nil || got+tempInfix+strconv.FormatUint(n, 36) != name {
			t.Fatalf("%q taken for a temporary file of %q", name, got)
		}
	})
}
