package remoting

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ExtAppender writes a command's custom header fields straight into the
// frame being encoded, in its own fixed order, instead of through the
// ExtFields map. A client's hot request (a send: 14 fields per message)
// then costs no map, no per-field strings and no key sort.
//
// AppendExt runs while the connection's write buffer is locked: it must
// only call w's methods, never block, and write the same fields each time
// it is called (a command can be encoded more than once).
type ExtAppender interface {
	AppendExt(w *ExtWriter)
}

// ExtWriter appends extFields entries to a frame in the command's
// serialization (ROCKETMQ: int16 key length, key, int32 value length,
// value; JSON: "key":"value" members, values always strings as the Java
// side writes them). Errors (an over-long key) are kept and reported by the
// encoder.
type ExtWriter struct {
	b    []byte
	json bool
	n    int // members written (JSON separators)
	err  error
}

// String appends key = value.
func (w *ExtWriter) String(key, value string) {
	if !w.key(key) {
		return
	}
	if w.json {
		w.b = appendJSONString(w.b, value)
		return
	}
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(len(value)))
	w.b = append(w.b, value...)
}

// Bytes appends key = value (value copied), for values built in a buffer.
func (w *ExtWriter) Bytes(key string, value []byte) {
	if !w.key(key) {
		return
	}
	if w.json {
		w.b = appendJSONBytes(w.b, value)
		return
	}
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(len(value)))
	w.b = append(w.b, value...)
}

// Int appends key = the decimal value.
func (w *ExtWriter) Int(key string, value int64) {
	if !w.key(key) {
		return
	}
	if w.json {
		w.b = append(w.b, '"')
		w.b = strconv.AppendInt(w.b, value, 10)
		w.b = append(w.b, '"')
		return
	}
	at := len(w.b)
	w.b = append(w.b, 0, 0, 0, 0)
	w.b = strconv.AppendInt(w.b, value, 10)
	binary.BigEndian.PutUint32(w.b[at:], uint32(len(w.b)-at-4))
}

// Bool appends key = "true" or "false".
func (w *ExtWriter) Bool(key string, value bool) {
	if value {
		w.String(key, "true")
	} else {
		w.String(key, "false")
	}
}

// key writes the key part of one entry; false after an error.
func (w *ExtWriter) key(k string) bool {
	if w.err != nil {
		return false
	}
	if w.json {
		if w.n > 0 {
			w.b = append(w.b, ',')
		}
		w.n++
		w.b = appendJSONString(w.b, k)
		w.b = append(w.b, ':')
		return true
	}
	if len(k) > math.MaxInt16 {
		w.err = fmt.Errorf("%w: extFields key of %d bytes exceeds int16 length", ErrInvalidHeader, len(k))
		return false
	}
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(k)))
	w.b = append(w.b, k...)
	w.n++
	return true
}

// appendJSONBytes is appendJSONString for a byte slice; the escaping path
// (control characters, as in message properties) converts once.
func appendJSONBytes(b, s []byte) []byte {
	for _, ch := range s {
		if ch < 0x20 || ch >= utf8.RuneSelf || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			q, _ := json.Marshal(string(s)) // marshalling a string cannot fail
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
