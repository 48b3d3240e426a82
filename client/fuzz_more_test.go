package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
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

// FuzzDecodeSendResponse: whatever frame a broker answers a send with,
// the send path's reflection-free header reader (over the raw extFields it
// asks for) agrees with remoting's DecodeHeader over the decoded map:
// the same header, or both a *remoting.HeaderError.
func FuzzDecodeSendResponse(f *testing.F) {
	for _, ext := range []map[string]string{
		{"msgId": "A,B", "queueId": "3", "queueOffset": "1234567890123", "transactionId": "tx", "batchUniqId": "U",
			"MSG_REGION": "R", "TRACE_ON": "false", "other": "x"},
		{"queueId": " 7 "},
		{},
		{"queueId": "x"},
		{"queueOffset": "-9223372036854775808"},
	} {
		for _, st := range []remoting.SerializeType{remoting.SerializeRocketMQ, remoting.SerializeJSON} {
			c := remoting.NewResponse(remoting.ResponseSuccess, "")
			c.SerializeType, c.ExtFields = st, ext
			frame, err := remoting.EncodeFrame(c)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(frame[4:])
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		byMap, err := remoting.DecodeFrame(frame)
		if err != nil {
			return
		}
		raw, err := remoting.DecodeFrameRawExt(frame)
		if err != nil {
			t.Fatalf("frame decodes with a map but not raw: %v", err)
		}
		var want wire.SendMessageResponseHeader
		werr := byMap.DecodeHeader(&want)
		for _, resp := range []*remoting.RemotingCommand{byMap, raw} {
			got, gerr := decodeSendResponse(resp)
			if (werr == nil) != (gerr == nil) || (werr == nil && got != want) {
				t.Fatalf("ext %q: decoded %+v %v, DecodeHeader %+v %v", byMap.ExtFields, got, gerr, want, werr)
			}
			var he *remoting.HeaderError
			if gerr != nil && !errors.As(gerr, &he) {
				t.Fatalf("%v is not a HeaderError", gerr)
			}
		}
	})
}

// FuzzParsePullResponse: any pull answer (code, header fields, body)
// gives a result or an error, never a panic; a found result holds only
// messages of the body that match the subscription, each stamped with the
// pulled queue and the answer's offset range, and a body that decodes
// only in part ends the batch after its last good message.
func FuzzParsePullResponse(f *testing.F) {
	one := encodeStored(f, storedMessage{topic: "T", body: []byte("hello"), props: "TAGS\x01a\x02UNIQ_KEY\x01X\x02"})
	two := append(bytes.Clone(one), encodeStored(f, storedMessage{topic: "T", body: []byte("b"), props: "TAGS\x01b\x02"})...)
	f.Add(uint8(0), "5", "0", "9", "", one, "")
	f.Add(uint8(0), "6", "0", "9", "0", two, "a || b")
	f.Add(uint8(0), "6", "0", "9", "0", two[:len(two)-3], "*")
	f.Add(uint8(1), "5", "x", "9", "", []byte(nil), "")
	f.Add(uint8(3), "-1", "0", "0", "1", []byte{0, 0, 0, 8}, "")
	f.Add(uint8(4), "", "", "", "", []byte(nil), "")
	codes := []int16{remoting.ResponseSuccess, remoting.ResponsePullNotFound, remoting.ResponsePullRetryImmediately,
		remoting.ResponsePullOffsetMoved, remoting.ResponseSystemError}
	f.Fuzz(func(t *testing.T, code uint8, next, minOff, maxOff, suggest string, body []byte, expr string) {
		resp := remoting.NewResponse(codes[int(code)%len(codes)], "r")
		resp.ExtFields = map[string]string{}
		for k, v := range map[string]string{"nextBeginOffset": next, "minOffset": minOff, "maxOffset": maxOff, "suggestWhichBrokerId": suggest} {
			if v != "" {
				resp.ExtFields[k] = v
			}
		}
		resp.Body = body
		r := &PullRequest{Group: "G", Queue: MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}}
		if sd, err := ParseTagExpression("T", expr, 1); err == nil {
			r.Subscription = sd
		}
		res, err := parsePullResponse("a:1", r, resp)
		if err != nil {
			return
		}
		if res.Status != PullFound {
			if len(res.Messages) != 0 {
				t.Fatalf("status %v with %d messages", res.Status, len(res.Messages))
			}
			return
		}
		all, derr := DecodeMessages(body)
		if len(res.Messages) > len(all) {
			t.Fatalf("%d messages from a body of %d", len(res.Messages), len(all))
		}
		if derr != nil && len(all) > 0 && res.NextBeginOffset != all[len(all)-1].QueueOffset+1 {
			t.Fatalf("partial body: next offset %d, last good message at %d", res.NextBeginOffset, all[len(all)-1].QueueOffset)
		}
		for _, m := range res.Messages {
			if m.QueueID != 3 || m.Properties[wire.PropertyMinOffset] != strconv.FormatInt(res.MinOffset, 10) ||
				m.Properties[wire.PropertyMaxOffset] != strconv.FormatInt(res.MaxOffset, 10) {
				t.Fatalf("message not stamped with the pull: %+v", m)
			}
			if r.Subscription != nil && !r.Subscription.MatchesTag(m.Tags) {
				t.Fatalf("message tagged %q does not match %q", m.Tags, expr)
			}
		}
	})
}

// FuzzLocalOffsetStoreLoad: a broadcasting consumer's offsets file, as
// found at startup, loads or fails with an error that names the file; what
// loads persists to a file that loads back to the same offsets.
func FuzzLocalOffsetStoreLoad(f *testing.F) {
	f.Add([]byte(`{"offsetTable":[{"topic":"T","brokerName":"b","queueId":1,"offset":42}]}`))
	f.Add([]byte(`{"offsetTable":[{"topic":"T","brokerName":"b","queueId":1,"offset":1},{"topic":"T","brokerName":"b","queueId":1,"offset":-7}]}`))
	f.Add([]byte(`{"offsetTable":null}`))
	f.Add([]byte(`{"offsetTable":[{"queueId":1e3}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "offsets.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s := NewLocalOffsetStore(path)
		if err := s.Load(); err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("load error does not name the file: %v", err)
			}
			return
		}
		want := s.table.snapshot()
		if err := s.Persist(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		back := NewLocalOffsetStore(path)
		if err := back.Load(); err != nil {
			t.Fatalf("persisted offsets do not load: %v", err)
		}
		if got := back.table.snapshot(); !maps.Equal(got, want) {
			t.Fatalf("offsets %v persisted and loaded back as %v", want, got)
		}
	})
}
