package storage

import (
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
