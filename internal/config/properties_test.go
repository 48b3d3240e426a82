package config

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
)

// TestParsePropertiesAsJava: a conf file is read as RocketMQ reads it,
// with java.util.Properties.load: every line form it accepts (a key
// with no value, no key, whitespace or ':' as separator, continued lines
// with any line ending, '!' comments, escapes) gives the pairs Java
// gives. A file that is not UTF-8 is read as ISO-8859-1, the encoding
// Properties.load(InputStream) uses, and a UTF-8 byte-order mark is not
// part of the first key. The cases were checked against Java 17's
// Properties.load.
func TestParsePropertiesAsJava(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]string
	}{
		{"=value\n", map[string]string{"": "value"}},
		{"  =x\n:y\n", map[string]string{"": "y"}},
		{"key value\n", map[string]string{"key": "value"}},
		{"key:value\n", map[string]string{"key": "value"}},
		{"key = = v\n", map[string]string{"key": "= v"}},
		{"\tk\t=\tv  \n", map[string]string{"k": "v  "}},
		{"key=\nbare\n", map[string]string{"key": "", "bare": ""}},
		{"key=a\\\n   b\n", map[string]string{"key": "ab"}},
		{"key=a\\\r\n   b\r\nk2=c\r\n", map[string]string{"key": "ab", "k2": "c"}},
		{"key=a\\\r   b\rk2=c", map[string]string{"key": "ab", "k2": "c"}},
		{"k=a\\\n#b\n", map[string]string{"k": "a#b"}},
		{"k=a\\\n\nb=c\n", map[string]string{"k": "a", "b": "c"}},
		{"! comment\n# comment \\\nk=v\n", map[string]string{"k": "v"}},
		{"  ! indented comment\n", map[string]string{}},
		{"k=\\u0041b\\t\\n\\q\n", map[string]string{"k": "Ab\t\nq"}},
		{"k=\\uD83D\\uDE00\n", map[string]string{"k": "😀"}},
		{"k\\ x\\=y=1\n", map[string]string{"k x=y": "1"}},
		{"k=a\\", map[string]string{"k": "a"}},
		{"k=v\\\n", map[string]string{"k": "v"}},
		{"k=a\\\\\nb=c\n", map[string]string{"k": "a\\", "b": "c"}},
		{"k=v\nk=w\n", map[string]string{"k": "w"}},
		{"k=${x}\n", map[string]string{"k": "${x}"}},
		{"k=\xe9t\xe9\n", map[string]string{"k": "été"}},
		{"k=été\n", map[string]string{"k": "été"}},
		{"\xef\xbb\xbfk=v\n", map[string]string{"k": "v"}},
		// A line that is only a backslash continues into nothing: the next
		// line still starts a logical line, so a blank or comment line
		// there is skipped, as Java 9+ reads it.
		{"\\\n\nk=v\n", map[string]string{"k": "v"}},
		{"\\\n#x=1\nk=v\n", map[string]string{"k": "v"}},
		{"  \\\n  !x\n", map[string]string{}},
		{"\\\n  \\\n k=v\n", map[string]string{"k": "v"}},
		{"\\\nk=v\n", map[string]string{"k": "v"}},
		{"\\", map[string]string{"": ""}},
		{"\\\n", map[string]string{"": ""}},
		{"\\\r", map[string]string{"": ""}},
		{"\\\r\n", map[string]string{}},
		{"k=v\r\n\\\r\n", map[string]string{"k": "v"}},
		{"k=\\\r\n", map[string]string{"k": ""}},
	} {
		got, err := ParseProperties([]byte(c.in))
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("%q: got %q (%v), want %q", c.in, got, err, c.want)
		}
	}
}

// TestParsePropertiesRefusesMalformedEscapes: a \u escape without four
// hex digits is the one thing Properties.load refuses (RocketMQ does not
// start); every such line is named, with its number and the reason.
func TestParsePropertiesRefusesMalformedEscapes(t *testing.T) {
	_, err := ParseProperties([]byte("a=1\nk=\\uZZZZ\nb=\\\n  2\nc=x\\u12\n"))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want *ParseError, got %v", err)
	}
	for _, want := range []string{`line 2: malformed \uXXXX escape "\uZZZZ"`, `line 5: malformed \uXXXX escape "\u12"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestLoadIgnoresEmptyKeyWithWarning: a line with no key ("=value") is
// read by Properties.load as the key "" and ignored by RocketMQ, which
// sets fields by name; the broker starts as RocketMQ's would, and the
// one warning names the line so the operator can see what it was meant
// to set. Given at run time (UPDATE_BROKER_CONFIG), it is refused.
func TestLoadIgnoresEmptyKeyWithWarning(t *testing.T) {
	p := writeConf(t, "listenPort=1\n# x\n=SYNC_FLUSH\nbrokerName=b\n")
	var c ignoringCfg
	rep, err := Load(p, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.ListenPort != 1 || c.Broker.BrokerName != "b" {
		t.Fatalf("keys around the empty one not applied: %+v", c.Broker)
	}
	if w := rep.Warning(); !strings.Contains(w, p) || !strings.Contains(w, `line 3 (=SYNC_FLUSH)`) || !strings.Contains(w, "no key") {
		t.Fatalf("warning %q", w)
	}
	err = Apply(map[string]string{"": "x"}, "UPDATE_BROKER_CONFIG", &c)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("Apply of an empty key: %v", err)
	}
}

// TestLoadNamesTheBadLine: a file Properties.load refuses is refused
// with the file, the line and the reason.
func TestLoadNamesTheBadLine(t *testing.T) {
	p := writeConf(t, "listenPort=1\nbrokerName=\\u00\n")
	var c brokerCfg
	err := LoadFile(p, &c)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v", err)
	}
}

// FuzzParseProperties: any text is read without a panic; a text that
// reads is written back by WriteProperties as text that reads to the same
// pairs; pairs are in line order, on lines the text has; a text that does
// not read names a line of it.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"=value\n", "key value\r\nk:v\rk2\\\r\n  w\n", "# c\\\n!x\nk=\\uD83D\\uDE00\\u0041\\", "k=\\u12\n", "\xef\xbb\xbfk=\xe9\n",
		"  \\\n\n\f\t=:=\\\\\\ \n", "k=a\\\n#b\n\\u00e9=1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		physical := 1 + bytes.Count(b, []byte("\n")) + bytes.Count(b, []byte("\r"))
		lines, err := parseLines(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > physical {
				t.Fatalf("%q: error %v names no line of the text", b, err)
			}
			return
		}
		for i, l := range lines {
			if l.line < 1 || l.line > physical || i > 0 && l.line <= lines[i-1].line {
				t.Fatalf("%q: pair %d on line %d (%d physical lines, previous %+v)", b, i, l.line, physical, lines[max(i-1, 0)])
			}
		}
		kv, err := ParseProperties(b)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteProperties(&buf, kv); err != nil {
			t.Fatal(err)
		}
		back, err := ParseProperties(buf.Bytes())
		if err != nil || !maps.Equal(back, kv) {
			t.Fatalf("%q read %q, written %q, read back %q (%v)", b, kv, buf.String(), back, err)
		}
	})
}
