package client

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// FuzzParseUniqID: a UNIQ_KEY either decodes (32 or 56 hex characters)
// into fields that are the id's own bytes, or fails with
// ErrInvalidMessageID.
func FuzzParseUniqID(f *testing.F) {
	f.Add("C0A8000100002A9F0000000000000001")
	f.Add("FE800000000000000000000000000001" + "00012A9F000000000000007B")
	f.Add("C0A8000100002A9F00000000000000")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, id string) {
		info, err := ParseUniqID(id)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessageID) {
				t.Fatalf("error %v does not wrap ErrInvalidMessageID", err)
			}
			return
		}
		raw, err := hex.DecodeString(id)
		if err != nil || (len(raw) != 16 && len(raw) != 28) {
			t.Fatalf("accepted %q (%d bytes, %v)", id, len(raw), err)
		}
		ipLen := len(raw) - 12
		if !slices.Equal([]byte(info.IP), raw[:ipLen]) || info.MonthOffset < 0 ||
			info.Counter != uint16(raw[len(raw)-2])<<8|uint16(raw[len(raw)-1]) {
			t.Fatalf("%q decodes as %+v", id, info)
		}
	})
}

// FuzzParseTagExpression: a tag expression either gives a subscription to
// everything or distinct, trimmed, non-empty tags with one hash code each
// (FilterAPI.buildSubscriptionData), or fails with ErrInvalidOption.
func FuzzParseTagExpression(f *testing.F) {
	for _, s := range []string{"*", "", " ", "TagA", "TagA || TagB", "a||a|| b ||", "||", " * ", "a|b", "ü||\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		sd, err := ParseTagExpression("T", expr, 1)
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("error %v does not wrap ErrInvalidOption", err)
			}
			return
		}
		var codes []int32
		if err := json.Unmarshal(sd.CodeSet, &codes); err != nil {
			t.Fatalf("code set %s: %v", sd.CodeSet, err)
		}
		if sd.SubString == "*" && strings.TrimSpace(expr) != "" && expr != "*" && len(sd.TagsSet) > 0 {
			t.Fatalf("%q subscribes to everything with tags %q", expr, sd.TagsSet)
		}
		if sd.SubString != "*" {
			if sd.SubString != expr || len(sd.TagsSet) == 0 || len(codes) != len(sd.TagsSet) {
				t.Fatalf("%q: %+v", expr, sd)
			}
		}
		for i, tag := range sd.TagsSet {
			if tag == "" || tag != strings.TrimSpace(tag) || strings.Contains(tag, "||") || slices.Contains(sd.TagsSet[:i], tag) {
				t.Fatalf("%q gives tag %q of %q", expr, tag, sd.TagsSet)
			}
			if codes[i] != javaStringHash(tag) {
				t.Fatalf("tag %q has code %d", tag, codes[i])
			}
		}
	})
}

// FuzzParseConfigAnswer: a GET_BROKER_CONFIG answer is read whatever its
// lines' length, and what it reads, written back as a config body, reads
// the same.
func FuzzParseConfigAnswer(f *testing.F) {
	f.Add([]byte("brokerName=b\nlistenPort=10911\n"))
	f.Add([]byte("# c\n! c\n\n a = b = c \r\nnoeq\nk:v\\\n  cont\\u0041\n"))
	long := []byte("namesrvAddr=" + strings.Repeat("h:9876;", 10000) + "\nbrokerName=b\n")
	f.Add(long)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseConfigAnswer("b", body)
		if err != nil {
			return
		}
		if bytes.Equal(body, long) && m["brokerName"] != "b" {
			t.Fatalf("the key after a long line was not read: %q", m)
		}
		var b bytes.Buffer
		if err := config.WriteProperties(&b, m); err != nil {
			t.Fatal(err)
		}
		back, err := parseConfigAnswer("b", b.Bytes())
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("%q read back as %q (%v)", m, back, err)
		}
	})
}
