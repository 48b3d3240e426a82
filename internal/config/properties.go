package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The Java properties text of conf files, config answers and updates,
// read and written as RocketMQ's Java side does.

// WriteProperties writes kv as sorted key=value lines that Java's
// Properties.load, and so ParseProperties, reads back exactly: RocketMQ's
// tools read config answers with it (MixAll.string2Properties). A value
// that needs no escape is written as is, as RocketMQ's properties2String
// writes every value, so '=' and ':' in values (name server lists) stay
// plain. Unlike properties2String, a backslash, a line break, a tab or
// form feed, and a leading space are escaped (Properties.store's escapes):
// written raw, load would drop the backslash or end the value at the
// line break. The text is ASCII: string2Properties loads the bytes as
// ISO-8859-1, so any other character is a \uXXXX escape (a surrogate pair
// outside the BMP), as Properties.store writes it.
func WriteProperties(w io.Writer, kv map[string]string) error {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(escapeProperty(k, true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(kv[k], false))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeProperty escapes s as Properties.store's saveConvert does, but
// leaves a value's separators and comment marks as they are (load needs
// them escaped only in keys).
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if key || i == 0 { // load skips the whitespace before a value
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case '=', ':', '#', '!':
			if key {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		default:
			if r < 0x20 || r > 0x7e {
				for _, u := range utf16.Encode([]rune{r}) {
					fmt.Fprintf(&b, `\u%04X`, u)
				}
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ParseError is a line of a properties text that cannot be read: a
// \uXXXX escape without four hex digits, the one thing Properties.load
// refuses (RocketMQ then does not start).
type ParseError struct {
	Line   int // the line the key/value pair starts on, from 1
	Reason string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// propLine is one key/value pair of a properties text and the line it
// starts on.
type propLine struct {
	key, value string
	line       int
}

// ParseProperties reads a Java properties text as RocketMQ does
// (Properties.load, which BrokerStartup, NamesrvStartup and
// MixAll.string2Properties use), without ${} expansion, which Java does
// not have. It reads conf files, config answers and UPDATE_BROKER_CONFIG
// / UPDATE_NAMESRV_CONFIG bodies. A later pair for a key wins; a pair
// with no key ("=value") is the key "". Every line that cannot be read is
// a *ParseError in the one error (errors.Join).
func ParseProperties(b []byte) (map[string]string, error) {
	lines, err := parseLines(b)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(lines))
	for _, l := range lines {
		out[l.key] = l.value
	}
	return out, nil
}

// parseLines splits a properties text into its pairs, as Properties.load
// does: logical lines (a line ending in an odd number of backslashes goes
// on on the next, whose leading whitespace is dropped; "\n", "\r\n" or
// "\r" end a line), comment lines (first non-blank character '#' or
// '!', never continued) and blank lines skipped, and each line split into
// key and value (loadPair). The text is UTF-8, or ISO-8859-1 when it is
// not valid UTF-8 (what Properties.load(InputStream) reads every file
// as); a UTF-8 byte-order mark is dropped.
func parseLines(b []byte) ([]propLine, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	text := string(b)
	if !utf8.Valid(b) {
		rs := make([]rune, len(b))
		for i, c := range b {
			rs[i] = rune(c)
		}
		text = string(rs)
	}
	var out []propLine
	var errs []error
	r := lineReader{s: text}
	for {
		logical, line, ok := r.next()
		if !ok {
			break
		}
		key, value, err := loadPair(logical)
		if err != nil {
			errs = append(errs, &ParseError{Line: line, Reason: err.Error()})
			continue
		}
		out = append(out, propLine{key: key, value: value, line: line})
	}
	return out, errors.Join(errs...)
}

// lineReader returns the logical lines of a properties text (Java's
// Properties.LineReader).
type lineReader struct {
	s    string
	pos  int
	line int  // physical lines read
	crlf bool // the last physical line ended in "\r\n"
}

// next returns the next logical line that is neither blank nor a comment,
// with the number of its first physical line; ok is false at the end.
// A line that is only a backslash continues into nothing, and a logical
// line with nothing in it yet is still at its start (Java 9+'s LineReader
// tests for comments while its buffer is empty): the physical line after
// it is read as a fresh one, so a blank or comment line there is skipped.
func (r *lineReader) next() (logical string, line int, ok bool) {
fresh:
	for r.pos < len(r.s) {
		line = r.line + 1
		phys := strings.TrimLeft(r.physical(), " \t\f")
		if phys == "" || phys[0] == '#' || phys[0] == '!' {
			continue
		}
		var b strings.Builder
		for {
			if !continued(phys) {
				b.WriteString(phys)
				break
			}
			b.WriteString(phys[:len(phys)-1])
			if r.pos == len(r.s) {
				if b.Len() == 0 && r.crlf {
					// Java continues at the "\r", skips the "\n" and
					// then finds the text ended with nothing read.
					return "", 0, false
				}
				break // Java drops a backslash that ends the text
			}
			if b.Len() == 0 {
				continue fresh
			}
			phys = strings.TrimLeft(r.physical(), " \t\f")
		}
		return b.String(), line, true
	}
	return "", 0, false
}

// physical returns the next physical line without its line ending.
func (r *lineReader) physical() string {
	r.line++
	rest := r.s[r.pos:]
	i := strings.IndexAny(rest, "\r\n")
	if i < 0 {
		r.pos, r.crlf = len(r.s), false
		return rest
	}
	r.pos += i + 1
	r.crlf = rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n'
	if r.crlf {
		r.pos++
	}
	return rest[:i]
}

// continued reports whether a line ends in an odd number of backslashes.
func continued(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}

// loadPair splits a logical line as Properties.load does: the key ends at
// the first unescaped '=', ':' or whitespace; the value starts after
// whitespace and at most one '=' or ':' among it, and keeps its trailing
// whitespace. Both are unescaped (unescapeProperty).
func loadPair(l string) (key, value string, err error) {
	keyLen, valueStart, hasSep, escaped := 0, len(l), false, false
	for ; keyLen < len(l); keyLen++ {
		c := l[keyLen]
		if !escaped && (c == '=' || c == ':') {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if !escaped && (c == ' ' || c == '\t' || c == '\f') {
			valueStart = keyLen + 1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for ; valueStart < len(l); valueStart++ {
		c := l[valueStart]
		if c == ' ' || c == '\t' || c == '\f' {
			continue
		}
		if hasSep || (c != '=' && c != ':') {
			break
		}
		hasSep = true
	}
	if key, err = unescapeProperty(l[:keyLen]); err != nil {
		return "", "", err
	}
	value, err = unescapeProperty(l[valueStart:])
	return key, value, err
}

// unescapeProperty resolves the escapes of Properties.load's loadConvert:
// \t, \n, \r, \f, \uXXXX (a surrogate pair, as Properties.store writes a
// character outside the BMP, makes one character), and a backslash
// before any other character stands for that character.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if c != '\\' || i == len(s) {
			if c != '\\' {
				out = append(out, c)
			}
			continue
		}
		c, size = utf8.DecodeRuneInString(s[i:])
		i += size
		switch c {
		case 'u':
			hex := s[i:min(i+4, len(s))]
			n, err := strconv.ParseUint(hex, 16, 16)
			if len(hex) < 4 || err != nil {
				return "", fmt.Errorf("malformed \\uXXXX escape \"%s\": want four hex digits, as Properties.load does", `\u`+hex)
			}
			out = append(out, rune(n))
			i += 4
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 'f':
			out = append(out, '\f')
		default:
			out = append(out, c)
		}
	}
	var b strings.Builder
	for i := 0; i < len(out); i++ {
		if i+1 < len(out) && utf16.IsSurrogate(out[i]) && out[i] < 0xdc00 && out[i+1] >= 0xdc00 && out[i+1] <= 0xdfff {
			b.WriteRune(utf16.DecodeRune(out[i], out[i+1]))
			i++
			continue
		}
		b.WriteRune(out[i]) // a lone surrogate becomes U+FFFD
	}
	return b.String(), nil
}
