package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

type storeCfg struct {
	FlushDiskType string        `prop:"flushDiskType"`
	FlushInterval time.Duration `prop:"flushIntervalCommitLog"`
	MaxSize       int32         `prop:"maxMessageSize"`
}

type brokerCfg struct {
	BrokerName string  `prop:"brokerName"`
	ListenPort int     `prop:"listenPort"`
	AutoCreate bool    `prop:"autoCreateTopicEnable"`
	Ratio      float64 `prop:"diskMaxUsedSpaceRatio"`
	ID         uint64  `prop:"brokerId"`
	Ignored    string  `prop:"-"`
	Store      storeCfg
}

func writeConf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFileSetsNestedAndTypedFields(t *testing.T) {
	p := writeConf(t, `# comment
brokerName = broker-a
listenPort=10921
autoCreateTopicEnable=true
diskMaxUsedSpaceRatio=0.75
brokerId=2
flushDiskType=SYNC_FLUSH
flushIntervalCommitLog=250
maxMessageSize=1024
`)
	c := brokerCfg{ListenPort: 10911, Store: storeCfg{FlushDiskType: "ASYNC_FLUSH"}}
	if err := LoadFile(p, &c); err != nil {
		t.Fatal(err)
	}
	want := brokerCfg{BrokerName: "broker-a", ListenPort: 10921, AutoCreate: true, Ratio: 0.75, ID: 2,
		Store: storeCfg{FlushDiskType: "SYNC_FLUSH", FlushInterval: 250 * time.Millisecond, MaxSize: 1024}}
	if c != want {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestDurationAcceptsGoSyntax(t *testing.T) {
	var c brokerCfg
	if err := Apply(map[string]string{"flushIntervalCommitLog": "2s"}, "flags", &c); err != nil {
		t.Fatal(err)
	}
	if c.Store.FlushInterval != 2*time.Second {
		t.Fatalf("got %v", c.Store.FlushInterval)
	}
}

// TestDurationMillisOutOfRange: milliseconds beyond what a duration holds
// are refused, not wrapped around (18446744073709552 ms would wrap to 1.6 s).
func TestDurationMillisOutOfRange(t *testing.T) {
	for _, v := range []string{"18446744073709552", "9223372036854776", "-9223372036854776"} {
		var c brokerCfg
		err := Apply(map[string]string{"flushIntervalCommitLog": v}, "flags", &c)
		if err == nil || !strings.Contains(err.Error(), "flushIntervalCommitLog") {
			t.Errorf("%s ms: got %v (%v), want an error naming the key", v, err, c.Store.FlushInterval)
		}
	}
	var c brokerCfg
	if err := Apply(map[string]string{"flushIntervalCommitLog": "9223372036854"}, "flags", &c); err != nil {
		t.Errorf("the largest whole-millisecond duration: %v", err)
	}
}

func TestUnknownKeyNamesKeyAndFile(t *testing.T) {
	p := writeConf(t, "flushDiskTyp=SYNC_FLUSH\n")
	var c brokerCfg
	err := LoadFile(p, &c)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("want ErrUnknownKey, got %v", err)
	}
	if !strings.Contains(err.Error(), "flushDiskTyp") || !strings.Contains(err.Error(), p) {
		t.Fatalf("error should name key and file: %v", err)
	}
}

func TestMalformedValues(t *testing.T) {
	cases := map[string]string{
		"listenPort":             "ten",
		"autoCreateTopicEnable":  "yes please",
		"maxMessageSize":         "99999999999",
		"brokerId":               "-1",
		"diskMaxUsedSpaceRatio":  "most",
		"flushIntervalCommitLog": "soon",
	}
	for k, v := range cases {
		var c brokerCfg
		err := Apply(map[string]string{k: v}, "test.conf", &c)
		var ke *KeyError
		if !errors.As(err, &ke) || !errors.Is(err, ErrBadValue) || ke.Key != k {
			t.Errorf("%s=%s: want ErrBadValue naming the key, got %v", k, v, err)
		}
	}
}

func TestIgnoredFieldIsNotAKey(t *testing.T) {
	var c brokerCfg
	if err := Apply(map[string]string{"-": "x"}, "t", &c); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("got %v", err)
	}
}

func TestPrintRoundTrips(t *testing.T) {
	src := brokerCfg{BrokerName: "b", ListenPort: 1, Ratio: 0.5, Store: storeCfg{FlushInterval: 1500 * time.Millisecond}}
	var buf bytes.Buffer
	if err := Print(&buf, &src); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "flushIntervalCommitLog=1500\n") {
		t.Fatalf("durations print as ms: %s", buf.String())
	}
	var back brokerCfg
	if err := LoadFile(writeConf(t, buf.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back != src {
		t.Fatalf("round trip: got %+v want %+v", back, src)
	}
}

// TestPrintEscapesAsJavaProperties: Print's text is what GET_BROKER_CONFIG
// and GET_NAMESRV_CONFIG answer, and mqadmin reads those with Java's
// Properties.load (MixAll.string2Properties): a value holding a backslash,
// '=', ':' or a line break reads back the same, and a value needing no
// escape is written as RocketMQ's properties2String writes it.
func TestPrintEscapesAsJavaProperties(t *testing.T) {
	src := brokerCfg{BrokerName: "C:\\data\\x=1:2\n#y\\", ListenPort: 1,
		Store: storeCfg{FlushDiskType: "ns1:9876;ns2:9876"}}
	var buf bytes.Buffer
	if err := Print(&buf, &src); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`brokerName=C:\\data\\x=1:2\n#y\\`, "flushDiskType=ns1:9876;ns2:9876"} {
		if !strings.Contains(buf.String(), line+"\n") {
			t.Errorf("no line %s in:\n%s", line, buf.String())
		}
	}
	var back brokerCfg
	if err := LoadFile(writeConf(t, buf.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back != src {
		t.Fatalf("round trip: got %+v want %+v", back, src)
	}
}

// TestWritePropertiesIsASCII: RocketMQ's tools read config text with
// MixAll.string2Properties, which hands the UTF-8 bytes to
// Properties.load(InputStream), an ISO-8859-1 reader: a non-ASCII
// character written as UTF-8 reaches mqadmin and the dashboard as
// mojibake ("é" as "Ã©"). So such characters are \uXXXX escapes, a
// character outside the BMP a surrogate pair as Properties.store writes
// it, and both ParseProperties and a conf file (LoadFile, the -p output
// saved) read them back.
func TestWritePropertiesIsASCII(t *testing.T) {
	kv := map[string]string{"storePathRootDir": "/data/消息", "brokerName": "é\x01\x7f😀"}
	var buf bytes.Buffer
	if err := WriteProperties(&buf, kv); err != nil {
		t.Fatal(err)
	}
	for i, c := range buf.Bytes() {
		if c >= 0x7f || c < 0x20 && c != '\n' {
			t.Fatalf("byte %d of %q is %#x: ISO-8859-1 readers would not read it as written", i, buf.String(), c)
		}
	}
	if want := `storePathRootDir=/data/\u6D88\u606F` + "\n"; !strings.Contains(buf.String(), want) {
		t.Errorf("no line %q in %q", want, buf.String())
	}
	got, err := ParseProperties(buf.Bytes())
	if err != nil || len(got) != 2 || got["storePathRootDir"] != kv["storePathRootDir"] || got["brokerName"] != kv["brokerName"] {
		t.Fatalf("read back %q (%v), want %q", got, err, kv)
	}
	src := brokerCfg{BrokerName: kv["brokerName"]}
	buf.Reset()
	if err := Print(&buf, &src); err != nil {
		t.Fatal(err)
	}
	var back brokerCfg
	if err := LoadFile(writeConf(t, buf.String()), &back); err != nil || back != src {
		t.Fatalf("-p output saved and loaded: %+v (%v), want %+v", back, err, src)
	}
}

func TestRejectsNonPointer(t *testing.T) {
	if err := Apply(nil, "x", brokerCfg{}); err == nil {
		t.Fatal("want error for non-pointer")
	}
}

func TestDuplicateKeyDeclarationIsAnError(t *testing.T) {
	type dup struct {
		A string `prop:"k"`
		B string `prop:"k"`
	}
	if _, err := Keys(&dup{}); err == nil {
		t.Fatal("want error for duplicate key")
	}
}

// FuzzPropertiesRoundTrip: whatever a key (empty too) and a value hold,
// ParseProperties reads WriteProperties' text back to the same pair, and
// the text has one line per key.
func FuzzPropertiesRoundTrip(f *testing.F) {
	for _, kv := range [][2]string{{"k", `C:\data\x=1:2` + "\n#y\\"}, {"a b=c:d", " lead"}, {"#k", "\\u0041"}, {"k", "é\r\t\f"}, {"!", ""}, {"", "=v"}, {"键😀", `\uD83D\uDE00\\uD83D` + "😀\x00"}} {
		f.Add(kv[0], kv[1])
	}
	f.Fuzz(func(t *testing.T, k, v string) {
		if k == "other" || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return
		}
		var buf bytes.Buffer
		if err := WriteProperties(&buf, map[string]string{k: v, "other": "x"}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), "\n"); n != 2 {
			t.Fatalf("%d lines for two keys: %q", n, buf.String())
		}
		got, err := ParseProperties(buf.Bytes())
		if err != nil || len(got) != 2 || got[k] != v || got["other"] != "x" {
			t.Fatalf("%q=%q wrote %q, read back %q (%v)", k, v, buf.String(), got, err)
		}
	})
}
