package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Frame layout (big-endian), RocketMQ's RemotingCommand.encode/decode:
//
//	int32 length      = 4 + headerLen + bodyLen (not counting itself)
//	int32 headerFlag  = serializeType<<24 | headerLen (24 bits)
//	header            JSON or ROCKETMQ serialized
//	body
const (
	// lengthFieldSize is the size of the leading frame length.
	lengthFieldSize = 4
	// maxHeaderLen is what fits the 24 bits of the header-length field.
	maxHeaderLen = 1<<24 - 1
	// rocketMQFixedHeaderLen is code(2)+language(1)+version(2)+opaque(4)+
	// flag(4)+remarkLen(4)+extLen(4) of a ROCKETMQ header.
	rocketMQFixedHeaderLen = 21
)

// DefaultMaxFrameSize is RocketMQ's default frame limit (16 MiB,
// com.rocketmq.remoting.frameMaxLength).
const DefaultMaxFrameSize = 16 << 20

// EncodeFrame serializes c into a whole frame, including the leading 4-byte
// length, using c.SerializeType for the header.
func EncodeFrame(c *RemotingCommand) ([]byte, error) {
	return AppendFrame(make([]byte, 0, 8+128+len(c.Remark)+len(c.Body)+32*len(c.ExtFields)), c)
}

// AppendFrame appends c's whole frame (EncodeFrame's bytes) to b and
// returns the extended slice. On error nothing is appended (the returned
// slice is b, possibly with a larger capacity). The connections encode
// straight into their write buffer with it: no frame-sized allocation and
// copy per command.
func AppendFrame(b []byte, c *RemotingCommand) ([]byte, error) {
	start := len(b)
	buf := append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	switch c.SerializeType {
	case SerializeJSON:
		buf = appendJSONHeader(buf, c)
	case SerializeRocketMQ:
		buf, err = appendRocketMQHeader(buf, c)
	default:
		err = fmt.Errorf("%w: unknown serialize type %d", ErrInvalidFrame, c.SerializeType)
	}
	if err != nil {
		return buf[:start], err
	}
	headerLen := len(buf) - start - 8
	if headerLen > maxHeaderLen {
		return buf[:start], fmt.Errorf("%w: header of %d bytes exceeds the 24-bit length field", ErrFrameTooLarge, headerLen)
	}
	total := len(buf) - start - lengthFieldSize + len(c.Body)
	if total > math.MaxInt32 {
		return buf[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	buf = append(buf, c.Body...)
	binary.BigEndian.PutUint32(buf[start:], uint32(total))
	binary.BigEndian.PutUint32(buf[start+4:], uint32(c.SerializeType)<<24|uint32(headerLen))
	return buf, nil
}

// DecodeFrame parses a frame WITHOUT its leading 4-byte length field (the
// bytes that follow it). The returned command's Body aliases frame.
func DecodeFrame(frame []byte) (*RemotingCommand, error) {
	return decodeFrame(frame, nil)
}

// DecodeFrameRawExt is DecodeFrame leaving a ROCKETMQ header's extFields
// raw, as the response of a call with LazyResponseExt is decoded:
// ExtFields is nil, ExtValue and RangeExt read the fields. JSON headers
// are decoded into ExtFields as by DecodeFrame.
func DecodeFrameRawExt(frame []byte) (*RemotingCommand, error) {
	return decodeFrame(frame, func(*RemotingCommand) bool { return true })
}

// decodeFrame is DecodeFrame with a hook: pick, when set, is called once
// per frame with the command's fixed fields decoded (code, flag, opaque),
// before its extFields; true keeps a ROCKETMQ header's extFields as the
// raw block (ExtFields nil, read with ExtValue/RangeExt), false decodes
// them into the map. The connection uses it to take a response's future
// and honour the call's LazyResponseExt.
func decodeFrame(frame []byte, pick func(*RemotingCommand) bool) (*RemotingCommand, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header-length field", ErrInvalidFrame, len(frame))
	}
	flag := binary.BigEndian.Uint32(frame[:4])
	st := SerializeType(flag >> 24)
	headerLen := int(flag & maxHeaderLen)
	if headerLen > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d beyond frame of %d bytes", ErrInvalidFrame, headerLen, len(frame))
	}
	header := frame[4 : 4+headerLen]
	var (
		c   *RemotingCommand
		err error
	)
	switch st {
	case SerializeJSON:
		c, err = decodeJSONHeader(header)
		if err == nil && pick != nil {
			pick(c) // the map is decoded already: JSON headers are rare
		}
	case SerializeRocketMQ:
		c, err = decodeRocketMQHeader(header, pick)
	default:
		return nil, fmt.Errorf("%w: unknown serialize type %d", ErrInvalidFrame, st)
	}
	if err != nil {
		if rh, ok := err.(*refusedHeader); ok {
			rh.cmd.SerializeType = st
		}
		return nil, err
	}
	c.SerializeType = st
	if body := frame[4+headerLen:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// extKeys appends the ExtFields keys to keys[:0] in wire order: first the
// decoded order (so decode→encode is byte-identical), then any other keys
// sorted (so encoding is deterministic). Callers pass a small array's
// slice so the common header needs no allocation.
func (c *RemotingCommand) extKeys(keys []string) []string {
	keys = keys[:0]
	if len(c.ExtFields) == 0 {
		return keys
	}
	if c.extRaw != "" && !c.extLazy {
		keys = appendRawExtKeys(keys, c.extRaw, c.ExtFields)
	} else {
		for _, k := range c.extOrder {
			if _, ok := c.ExtFields[k]; ok {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == len(c.ExtFields) {
		return keys
	}
	known := len(keys)
	for k := range c.ExtFields {
		if !slices.Contains(keys[:known], k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[known:])
	return keys
}

// appendRawExtKeys appends the keys of a decoded ROCKETMQ extFields block
// that are still in m, first occurrence only, in wire order.
func appendRawExtKeys(keys []string, raw string, m map[string]string) []string {
	first := len(keys)
	rangeRawExt(raw, func(k, _ string) bool {
		if _, ok := m[k]; ok && !slices.Contains(keys[first:], k) {
			keys = append(keys, k)
		}
		return true
	})
	return keys
}

// extKeysBuf is the stack room extKeys gets: a send header has 14 keys.
const extKeysBuf = 16

// maxExtFields bounds the extFields of one header. RocketMQ's custom
// headers have a few dozen fields; a 16 MiB header holds 2.8 million
// empty ones, which cost hundreds of MiB and seconds of the reader's CPU
// to build as a map.
const maxExtFields = 1024

// refusedHeader is a header whose fixed fields decoded but whose
// extFields are past maxExtFields: the connection answers the request
// (cmd has its code, opaque and flag) instead of closing.
type refusedHeader struct {
	cmd    *RemotingCommand
	fields int // at least this many; JSON stops counting past the bound
}

func (e *refusedHeader) Error() string {
	return fmt.Sprintf("%v: more than %d extFields (%d or more)", ErrInvalidHeader, maxExtFields, e.fields)
}

func (e *refusedHeader) Unwrap() error { return ErrInvalidHeader }

// ---- JSON header (RemotingSerializable / the Go client's jsoniter) ----

// appendJSONHeader writes the header exactly as the official Go client
// does: fixed field order, no spaces, HTML-escaped strings, remark always
// present, extFields null when the map is nil.
func appendJSONHeader(b []byte, c *RemotingCommand) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(c.Code), 10)
	b = append(b, `,"language":"`...)
	b = append(b, c.Language.String()...)
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	b = append(b, `,"opaque":`...)
	b = strconv.AppendInt(b, int64(c.Opaque), 10)
	b = append(b, `,"flag":`...)
	b = strconv.AppendInt(b, int64(c.Flag), 10)
	b = append(b, `,"remark":`...)
	b = appendJSONString(b, c.Remark)
	b = append(b, `,"extFields":`...)
	if c.ExtFields == nil && c.ExtAppender == nil && !c.extLazy {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		n := 0
		if c.ExtAppender != nil {
			w := &c.extw // in the command: a local would escape through the interface call
			*w = ExtWriter{b: b, json: true}
			c.ExtAppender.AppendExt(w)
			b, n = w.b, w.n
			*w = ExtWriter{} // do not keep the connection's buffer reachable
		}
		if c.extLazy {
			c.RangeExt(func(k, v string) bool {
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = appendJSONString(b, k)
				b = append(b, ':')
				b = appendJSONString(b, v)
				return true
			})
		}
		var kb [extKeysBuf]string
		for _, k := range c.extKeys(kb[:0]) {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, c.ExtFields[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendJSONString quotes s like encoding/json and jsoniter's default
// config (HTML characters escaped), with a copy-only fast path.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch >= utf8.RuneSelf || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // marshalling a string cannot fail
	return append(b, q...)
}

// jsonHeader mirrors the JSON fields of RemotingCommand. Unknown fields
// (Java adds serializeTypeCurrentRPC) are ignored.
type jsonHeader struct {
	Code      int32           `json:"code"`
	Language  json.RawMessage `json:"language"`
	Version   int16           `json:"version"`
	Opaque    int32           `json:"opaque"`
	Flag      int32           `json:"flag"`
	Remark    *string         `json:"remark"`
	ExtFields orderedExt      `json:"extFields"`
}

// orderedExt decodes extFields keeping the key order of the wire.
type orderedExt struct {
	m     map[string]string
	order []string
	// over is set when the object holds more than maxExtFields members:
	// decoding stopped there (the rest of the header still decodes).
	over bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *orderedExt) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("extFields is not an object")
	}
	o.m = make(map[string]string)
	for n := 0; dec.More(); n++ {
		if n == maxExtFields {
			o.over = true
			return nil
		}
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key := kt.(string) // object keys are always strings
		vt, err := dec.Token()
		if err != nil {
			return err
		}
		var val string
		switch v := vt.(type) {
		case string:
			val = v
		case json.Number:
			// Lenient: some non-Java clients send numbers unquoted.
			val = v.String()
		case bool:
			val = strconv.FormatBool(v)
		case nil:
			// Java skips null values when encoding; treat as absent.
			continue
		default:
			return fmt.Errorf("extFields[%q] is not a scalar", key)
		}
		if _, dup := o.m[key]; !dup {
			o.order = append(o.order, key)
		}
		o.m[key] = val
	}
	return nil
}

func decodeJSONHeader(h []byte) (*RemotingCommand, error) {
	var jh jsonHeader
	if err := json.Unmarshal(h, &jh); err != nil {
		return nil, fmt.Errorf("%w: json: %v", ErrInvalidHeader, err)
	}
	c := &RemotingCommand{
		Code:      int16(jh.Code),
		Version:   jh.Version,
		Opaque:    jh.Opaque,
		Flag:      jh.Flag,
		ExtFields: jh.ExtFields.m,
		extOrder:  jh.ExtFields.order,
	}
	if int32(c.Code) != jh.Code {
		// RocketMQ 5's POP codes (POP_MESSAGE 200050, ACK_MESSAGE, …) do
		// not fit 16 bits; only JSON headers carry them. Nothing here
		// serves one: the connection answers such a request
		// REQUEST_CODE_NOT_SUPPORTED naming it (wideCode) and stays up.
		if jh.Flag&FlagResponse != 0 {
			return nil, fmt.Errorf("%w: json: response code %d beyond 16 bits", ErrInvalidHeader, jh.Code)
		}
		c.wideCode = jh.Code
	}
	if jh.Remark != nil {
		c.Remark = *jh.Remark
	}
	if jh.ExtFields.over {
		c.ExtFields, c.extOrder = nil, nil
		return nil, &refusedHeader{cmd: c, fields: maxExtFields + 1}
	}
	if len(jh.Language) > 0 && string(jh.Language) != "null" {
		var name string
		if err := json.Unmarshal(jh.Language, &name); err == nil {
			c.Language, _ = ParseLanguage(name)
		} else {
			var n uint8
			if err := json.Unmarshal(jh.Language, &n); err != nil {
				return nil, fmt.Errorf("%w: json: language %s is neither a name nor a code", ErrInvalidHeader, jh.Language)
			}
			c.Language = LanguageCode(n)
		}
	}
	return c, nil
}

// ---- ROCKETMQ header (RocketMQSerializable) ----

func appendRocketMQHeader(b []byte, c *RemotingCommand) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(c.Code))
	b = append(b, byte(c.Language))
	b = binary.BigEndian.AppendUint16(b, uint16(c.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Remark)))
	b = append(b, c.Remark...)
	extLenAt := len(b)
	b = append(b, 0, 0, 0, 0)
	if c.ExtAppender != nil {
		w := &c.extw // in the command: a local would escape through the interface call
		*w = ExtWriter{b: b}
		c.ExtAppender.AppendExt(w)
		var err error
		b, err = w.b, w.err
		*w = ExtWriter{} // do not keep the connection's buffer reachable
		if err != nil {
			return b, err
		}
	}
	if c.extLazy {
		b = append(b, c.extRaw...) // validated when decoded
	}
	var kb [extKeysBuf]string
	for _, k := range c.extKeys(kb[:0]) {
		if len(k) > math.MaxInt16 {
			// b, not nil: AppendFrame cuts the caller's buffer back to
			// where this frame started.
			return b, fmt.Errorf("%w: extFields key of %d bytes exceeds int16 length", ErrInvalidHeader, len(k))
		}
		v := c.ExtFields[k]
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	binary.BigEndian.PutUint32(b[extLenAt:], uint32(len(b)-extLenAt-4))
	return b, nil
}

// rmqReader walks a ROCKETMQ header with bounds checks: every length on
// the wire is untrusted.
type rmqReader struct {
	b   []byte
	off int
}

func (r *rmqReader) need(n int, what string) error {
	if n < 0 || n > len(r.b)-r.off {
		return fmt.Errorf("%w: rocketmq: %s of %d bytes beyond header (%d left)", ErrInvalidHeader, what, n, len(r.b)-r.off)
	}
	return nil
}

func (r *rmqReader) u16() uint16 { v := binary.BigEndian.Uint16(r.b[r.off:]); r.off += 2; return v }
func (r *rmqReader) u32() uint32 { v := binary.BigEndian.Uint32(r.b[r.off:]); r.off += 4; return v }

func (r *rmqReader) str(n int, what string) (string, error) {
	if err := r.need(n, what); err != nil {
		return "", err
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s, nil
}

// countRocketMQExt counts the key/value pairs of a ROCKETMQ extFields
// block, stopping at the first length that does not fit (the decoding pass
// reports it), and returns where it stopped: len(b) when the pairs cover
// the whole block.
func countRocketMQExt(b []byte) (n, end int) {
	off := 0
	for off+2 <= len(b) {
		kl := int(int16(binary.BigEndian.Uint16(b[off:])))
		if kl < 0 || off+2+kl+4 > len(b) {
			break
		}
		vl := int(int32(binary.BigEndian.Uint32(b[off+2+kl:])))
		if vl < 0 || off+2+kl+4+vl > len(b) {
			break
		}
		off += 2 + kl + 4 + vl
		n++
	}
	return n, off
}

func decodeRocketMQHeader(h []byte, pick func(*RemotingCommand) bool) (*RemotingCommand, error) {
	r := &rmqReader{b: h}
	if err := r.need(rocketMQFixedHeaderLen-4, "fixed fields"); err != nil {
		return nil, err
	}
	c := &RemotingCommand{}
	c.Code = int16(r.u16())
	c.Language = LanguageCode(r.b[r.off])
	r.off++
	c.Version = int16(r.u16())
	c.Opaque = int32(r.u32())
	c.Flag = int32(r.u32())
	remarkLen := int(int32(r.u32()))
	var err error
	if c.Remark, err = r.str(remarkLen, "remark"); err != nil {
		return nil, err
	}
	if err := r.need(4, "extFields length"); err != nil {
		return nil, err
	}
	extLen := int(int32(r.u32()))
	if err := r.need(extLen, "extFields"); err != nil {
		return nil, err
	}
	raw := pick != nil && pick(c)
	if extLen == 0 {
		return c, nil
	}
	ext := &rmqReader{b: r.b[r.off : r.off+extLen]}
	n, end := countRocketMQExt(ext.b)
	if n > maxExtFields {
		return nil, &refusedHeader{cmd: c, fields: n}
	}
	if raw {
		// Validated now, so ExtValue/RangeExt can walk it unchecked.
		if end != len(ext.b) {
			return nil, fmt.Errorf("%w: rocketmq: malformed extFields block of %d bytes", ErrInvalidHeader, extLen)
		}
		c.extRaw, c.extLazy = string(ext.b), true
		return c, nil
	}
	// One string holds every key and value (they are substrings of it),
	// and the map is sized by the first pass: a send header has ~14
	// fields, and per-field strings plus map growth were most of the
	// decode cost.
	all := string(ext.b)
	c.ExtFields = make(map[string]string, n)
	c.extRaw = all // the wire order, read again only to re-encode
	sub := func(n int, what string) (string, error) {
		if err := ext.need(n, what); err != nil {
			return "", err
		}
		v := all[ext.off : ext.off+n]
		ext.off += n
		return v, nil
	}
	for ext.off < len(ext.b) {
		if err := ext.need(2, "key length"); err != nil {
			return nil, err
		}
		k, err := sub(int(int16(ext.u16())), "key")
		if err != nil {
			return nil, err
		}
		if err := ext.need(4, "value length"); err != nil {
			return nil, err
		}
		v, err := sub(int(int32(ext.u32())), "value")
		if err != nil {
			return nil, err
		}
		c.ExtFields[k] = v
	}
	return c, nil
}
