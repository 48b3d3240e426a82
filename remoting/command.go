package remoting

import (
	"fmt"
	"sync/atomic"
)

// SerializeType selects how a frame's header is serialized; it is the top
// byte of the frame's header-length field.
type SerializeType uint8

const (
	// SerializeJSON is RocketMQ's JSON header (the Go client's only mode).
	SerializeJSON SerializeType = 0
	// SerializeRocketMQ is RocketMQ's compact binary header
	// (RocketMQSerializable).
	SerializeRocketMQ SerializeType = 1
)

// String returns "JSON" or "ROCKETMQ" as RocketMQ's SerializeType enum does.
func (t SerializeType) String() string {
	switch t {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	default:
		return fmt.Sprintf("SerializeType(%d)", uint8(t))
	}
}

// LanguageCode identifies the implementation language of the peer, in
// RocketMQ's LanguageCode enum order. JSON headers carry the name, ROCKETMQ
// headers the number.
type LanguageCode uint8

// Language codes, RocketMQ's LanguageCode.java order. ONLY APPEND.
const (
	LanguageJava   LanguageCode = 0
	LanguageCPP    LanguageCode = 1
	LanguageDotNet LanguageCode = 2
	LanguagePython LanguageCode = 3
	LanguageDelphi LanguageCode = 4
	LanguageErlang LanguageCode = 5
	LanguageRuby   LanguageCode = 6
	LanguageOther  LanguageCode = 7
	LanguageHTTP   LanguageCode = 8
	LanguageGo     LanguageCode = 9
	LanguagePHP    LanguageCode = 10
	LanguageOMS    LanguageCode = 11
	LanguageRust   LanguageCode = 12
	LanguageNodeJS LanguageCode = 13
)

var languageNames = [...]string{
	"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER",
	"HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS",
}

// String returns the enum name used in JSON headers ("JAVA", "GO"). Codes
// unknown to this table print as "OTHER" because a JSON header can only
// carry names the peer knows.
func (l LanguageCode) String() string {
	if int(l) < len(languageNames) {
		return languageNames[l]
	}
	return "OTHER"
}

// ParseLanguage maps a JSON header language name to its code; ok is false
// for names this table does not know.
func ParseLanguage(name string) (LanguageCode, bool) {
	for i, n := range languageNames {
		if n == name {
			return LanguageCode(i), true
		}
	}
	return LanguageOther, false
}

// Flag bits of RemotingCommand.Flag (RemotingCommand.RPC_TYPE/RPC_ONEWAY).
const (
	// FlagResponse marks a response command.
	FlagResponse int32 = 1 << 0
	// FlagOneway marks a request that expects no response.
	FlagOneway int32 = 1 << 1
)

// DefaultVersion is the version the official Go client sends (317). The
// name server looks at it to decide between standard and legacy route JSON.
const DefaultVersion int16 = 317

// RemotingCommand is one request or response of the RocketMQ remoting
// protocol: the header fields plus an opaque body.
type RemotingCommand struct {
	// Code is the request code, or the response code in a response.
	Code int16
	// Language is the sender's implementation language.
	Language LanguageCode
	// Version is the sender's protocol version (the Go client sends 317).
	Version int16
	// Opaque pairs a response with its request on one connection.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is free text, mostly the error text of a response.
	Remark string
	// ExtFields carries the typed custom header as strings.
	ExtFields map[string]string
	// Body is the payload after the header.
	Body []byte
	// SerializeType is how the header is (or was) serialized.
	SerializeType SerializeType
	// ExtAppender, when set, writes custom header fields straight into the
	// frame when the command is encoded, before the ExtFields entries (its
	// keys must not repeat theirs). Hot client requests use it instead of
	// ExtFields; it is not visible in ExtFields (hooks, String).
	ExtAppender ExtAppender

	// LazyResponseExt, set on a request before a sync or async call,
	// leaves a ROCKETMQ response's extFields undecoded: the response's
	// ExtFields is nil and ExtValue/RangeExt read the raw block (no map
	// per response). For hot calls whose caller reads the answer with
	// ExtValue/RangeExt; hooks see the response without ExtFields.
	LazyResponseExt bool

	// extOrder (JSON) and extRaw (ROCKETMQ: the extFields block) remember
	// the wire order of a decoded command's ExtFields keys so that
	// decode→encode reproduces the frame byte for byte; keys not in them
	// are written in sorted order. With extLazy, extRaw is the only copy
	// of the fields (ExtFields nil).
	extOrder []string
	extRaw   string
	extLazy  bool
	// wideCode is a decoded JSON request's code when it does not fit Code
	// (16 bits); such a request is answered not-supported, never handled.
	wideCode int32
	// extw is the ExtWriter handed to ExtAppender while the command is
	// encoded (a command is encoded by one goroutine at a time).
	extw ExtWriter
}

// ExtValue returns the extFields value of key, from ExtFields or, for a
// response decoded with LazyResponseExt, from the raw block (the last
// occurrence wins, as in the map).
func (c *RemotingCommand) ExtValue(key string) (string, bool) {
	if !c.extLazy {
		v, ok := c.ExtFields[key]
		return v, ok
	}
	var val string
	found := false
	c.RangeExt(func(k, v string) bool {
		if k == key {
			val, found = v, true
		}
		return true
	})
	return val, found
}

// RangeExt calls fn for each extFields pair until it returns false: the
// raw block's pairs in wire order (a repeated key each time) for a
// response decoded with LazyResponseExt, else ExtFields' entries in map
// order.
func (c *RemotingCommand) RangeExt(fn func(k, v string) bool) {
	if !c.extLazy {
		for k, v := range c.ExtFields {
			if !fn(k, v) {
				return
			}
		}
		return
	}
	rangeRawExt(c.extRaw, fn)
}

// rangeRawExt calls fn for each pair of a ROCKETMQ extFields block (2-byte
// key length, key, 4-byte value length, value; big-endian) in wire order
// until it returns false. The block was validated when it was decoded.
func rangeRawExt(raw string, fn func(k, v string) bool) {
	for off := 0; off+2 <= len(raw); {
		kl := int(raw[off])<<8 | int(raw[off+1])
		off += 2
		k := raw[off : off+kl]
		off += kl
		vl := int(raw[off])<<24 | int(raw[off+1])<<16 | int(raw[off+2])<<8 | int(raw[off+3])
		off += 4
		v := raw[off : off+vl]
		off += vl
		if !fn(k, v) {
			return
		}
	}
}

// opaqueSeq hands out request opaques process-wide, like RocketMQ's static
// RemotingCommand.requestId.
var opaqueSeq atomic.Int32

func nextOpaque() int32 { return opaqueSeq.Add(1) }

// NextOpaque returns a fresh request opaque from the process-wide counter
// NewRequest uses, for callers that build a RemotingCommand themselves
// (to reuse it across attempts without NewRequest's allocations).
func NextOpaque() int32 { return nextOpaque() }

// NewRequest builds a request with the given code, a custom header (nil or
// a pointer to a struct with `ext` tags, see EncodeHeader) and body. It
// looks like a request of the official Go client: language GO, version 317,
// JSON serialization.
func NewRequest(code int16, header any, body []byte) *RemotingCommand {
	c := &RemotingCommand{
		Code:      code,
		Language:  LanguageGo,
		Version:   DefaultVersion,
		Opaque:    nextOpaque(),
		ExtFields: map[string]string{},
		Body:      body,
	}
	if header != nil {
		c.EncodeHeader(header)
	}
	return c
}

// NewResponse builds a response with the given code and remark. The server
// (or Conn.WriteResponse) fills Opaque and SerializeType from the request.
func NewResponse(code int16, remark string) *RemotingCommand {
	return &RemotingCommand{
		Code:     code,
		Language: LanguageGo,
		Version:  DefaultVersion,
		Flag:     FlagResponse,
		Remark:   remark,
	}
}

// IsResponse reports whether the response flag bit is set.
func (c *RemotingCommand) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway flag bit is set.
func (c *RemotingCommand) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// String summarizes the command for logs (no body bytes).
func (c *RemotingCommand) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	}
	return fmt.Sprintf("%s{code=%d opaque=%d flag=%d lang=%s ver=%d remark=%q ext=%v body=%dB}",
		kind, c.Code, c.Opaque, c.Flag, c.Language, c.Version, c.Remark, c.ExtFields, len(c.Body))
}
