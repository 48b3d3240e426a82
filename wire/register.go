package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// ErrBadBody is wrapped when a body (register-broker body, data version,
// topic route, cluster info) cannot be decoded; the message says what was
// wrong.
var ErrBadBody = errors.New("wire: malformed body")

// RegisterBrokerBody is the body of REGISTER_BROKER (103).
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	// FilterServerList replaces the broker's filter servers; empty clears
	// them (a missing field reads as empty, as in RocketMQ).
	FilterServerList []string `json:"filterServerList"`
}

// BodyCRC32 computes RocketMQ's body checksum: crc32 IEEE masked with
// 0x7FFFFFFF (UtilAll.crc32 returns a non-negative Java int). Brokers put
// it in REGISTER_BROKER's bodyCrc32 header.
func BodyCRC32(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

// maxRegisterItem bounds one length-prefixed item in a compressed
// register body, so a corrupt length cannot make us allocate gigabytes.
const maxRegisterItem = 16 << 20

// MaxRegisterTopics and maxRegisterInflated bound what one register body
// may decode to: zlib inflates a frame-sized body a thousandfold, a frame
// of short JSON entries names over a million topics, and every topic
// costs the name server a few hundred bytes per request in flight plus
// its route. MaxRegisterTopics is several times the largest table raftmq
// brokers are measured with (45,000 topics, BENCHMARKS.md) and bounds
// both layouts.
const (
	MaxRegisterTopics   = 1 << 18
	maxRegisterInflated = 64 << 20
)

// maxTopicAttributes bounds one topic's attributes in a register body:
// RocketMQ defines four (queue.type, cleanup.policy, message.type,
// reserve.time), the name server reads none, and a body of short entries
// would otherwise decode to millions.
const maxTopicAttributes = 64

// maxFilterServers bounds a register body's filter server list: the name
// server copies it into every route of the broker's topics, and RocketMQ
// brokers run a few (filterServerNums) if any.
const maxFilterServers = 64

// DecodeRegisterBrokerBody decodes a REGISTER_BROKER body. With compressed
// (request header compressed=true) the body is RocketMQ's
// RegisterBrokerBody.encode(true) layout inside a zlib stream: int32-prefixed
// DataVersion JSON, int32 topic count, int32-prefixed TopicConfig.encode()
// strings ("name read write perm filterType {attributes}"), int32-prefixed
// filter-server JSON array and, from 5.0 brokers, a topic-queue-mapping
// section that the name server does not use. Otherwise it is plain JSON. An
// empty body is a registration without topics (data version zero).
func DecodeRegisterBrokerBody(data []byte, compressed bool) (*RegisterBrokerBody, error) {
	body := &RegisterBrokerBody{}
	body.TopicConfigSerializeWrapper.TopicConfigTable = map[string]TopicConfig{}
	if len(data) == 0 {
		return body, nil
	}
	if !compressed {
		// Quote legacy keys first: a Java broker's static-topic mapping
		// section holds Map<Integer,…> fields that fastjson writes unquoted.
		var w registerBodyJSON
		if err := json.Unmarshal(QuoteLegacyKeys(data), &w); err != nil {
			return nil, fmt.Errorf("%w: register broker body: %v", ErrBadBody, err)
		}
		body.FilterServerList = w.FilterServerList
		body.TopicConfigSerializeWrapper.DataVersion = w.Wrapper.DataVersion
		for name, tc := range w.Wrapper.TopicConfigTable {
			if tc != nil {
				if tc.TopicName == "" {
					tc.TopicName = name
				}
				body.TopicConfigSerializeWrapper.TopicConfigTable[name] = tc.withDefaults()
			}
		}
		return body, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed register broker body: %v", ErrBadBody, err)
	}
	defer zr.Close()
	lr := &inflateLimit{r: zr, left: maxRegisterInflated}
	dv, err := readRegisterItem(lr, "data version")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(dv, &body.TopicConfigSerializeWrapper.DataVersion); err != nil {
		return nil, fmt.Errorf("%w: data version: %v", ErrBadBody, err)
	}
	n, err := readRegisterInt32(lr, "topic count")
	if err != nil {
		return nil, err
	}
	if n < 0 || n > MaxRegisterTopics {
		return nil, fmt.Errorf("%w: topic count %d out of range (at most %d topics per broker)", ErrBadBody, n, MaxRegisterTopics)
	}
	for i := int32(0); i < n; i++ {
		item, err := readRegisterItem(lr, "topic config")
		if err != nil {
			return nil, err
		}
		tc, err := parseCompactTopicConfig(string(item))
		if err != nil {
			return nil, err
		}
		body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
	}
	fs, err := readRegisterItem(lr, "filter server list")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(fs, (*filterServersJSON)(&body.FilterServerList)); err != nil {
		return nil, fmt.Errorf("%w: filter server list: %v", ErrBadBody, err)
	}
	// The mapping section (5.0+) is not used and absent on old brokers;
	// reading to the end still verifies the stream's checksum, so a
	// corrupted body is refused rather than half applied.
	// The limit keeps a zlib bomb from burning CPU.
	rest, err := io.Copy(io.Discard, io.LimitReader(zr, maxRegisterItem+1))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed register broker body: %v", ErrBadBody, err)
	}
	if rest > maxRegisterItem {
		return nil, fmt.Errorf("%w: compressed register broker body: trailing section over %d bytes", ErrBadBody, maxRegisterItem)
	}
	return body, nil
}

// registerBodyJSON mirrors RegisterBrokerBody with optional topic fields, so
// fields a sender leaves out take RocketMQ's TopicConfig defaults (fastjson
// starts from the Java constructor's values) in one decoding pass.
type registerBodyJSON struct {
	Wrapper struct {
		TopicConfigTable topicTableJSON[*topicConfigJSON] `json:"topicConfigTable"`
		DataVersion      DataVersion                      `json:"dataVersion"`
	} `json:"topicConfigSerializeWrapper"`
	FilterServerList filterServersJSON `json:"filterServerList"`
}

// filterServersJSON is a filter server list, counted before it is decoded
// (maxFilterServers).
type filterServersJSON []string

func (f *filterServersJSON) UnmarshalJSON(b []byte) error {
	if n := jsonEntries(b); n > maxFilterServers {
		return fmt.Errorf("%d filter servers, at most %d", n, maxFilterServers)
	}
	return json.Unmarshal(b, (*[]string)(f))
}

// topicTableJSON is a JSON body's topic table, counted before it is
// decoded: a frame of short entries names millions of topics, a few
// hundred bytes each once decoded, so one past MaxRegisterTopics is
// refused as in the compressed layout.
type topicTableJSON[T any] map[string]T

func (t *topicTableJSON[T]) UnmarshalJSON(b []byte) error {
	if n := jsonEntries(b); n > MaxRegisterTopics {
		return fmt.Errorf("topic count %d out of range (at most %d topics per broker)", n, MaxRegisterTopics)
	}
	return json.Unmarshal(b, (*map[string]T)(t))
}

// DecodeLegacyRegisterBody decodes the REGISTER_BROKER body of a broker
// older than 3.0.11: a bare TopicConfigSerializeWrapper, held to
// MaxRegisterTopics like the other layouts.
func DecodeLegacyRegisterBody(data []byte) (*RegisterBrokerBody, error) {
	type topicConfig struct {
		TopicConfig
		Attributes attributesJSON `json:"attributes"`
	}
	var w struct {
		TopicConfigTable topicTableJSON[topicConfig] `json:"topicConfigTable"`
		DataVersion      DataVersion                 `json:"dataVersion"`
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("%w: topic config wrapper: %v", ErrBadBody, err)
		}
	}
	table := make(map[string]TopicConfig, len(w.TopicConfigTable))
	for name, tc := range w.TopicConfigTable {
		tc.TopicConfig.Attributes = tc.Attributes
		table[name] = tc.TopicConfig
	}
	return &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
		TopicConfigTable: table, DataVersion: w.DataVersion}}, nil
}

// jsonEntries counts the members of b when it is a JSON object or array,
// 0 when it does not start as one; on bytes that are not valid JSON it
// counts the commas at the top level, without allocating.
func jsonEntries(b []byte) int {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || (b[0] != '{' && b[0] != '[') {
		return 0
	}
	if len(bytes.TrimSpace(b[1:len(b)-1])) == 0 {
		return 0
	}
	n, depth, inString := 1, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 1:
			n++
		}
	}
	return n
}

type topicConfigJSON struct {
	TopicName       string         `json:"topicName"`
	ReadQueueNums   *int           `json:"readQueueNums"`
	WriteQueueNums  *int           `json:"writeQueueNums"`
	Perm            *int           `json:"perm"`
	TopicFilterType string         `json:"topicFilterType"`
	TopicSysFlag    int            `json:"topicSysFlag"`
	Order           bool           `json:"order"`
	Attributes      attributesJSON `json:"attributes"`
}

// attributesJSON is a topic's attributes, counted before they are
// decoded (maxTopicAttributes).
type attributesJSON map[string]string

func (a *attributesJSON) UnmarshalJSON(b []byte) error {
	if n := jsonEntries(b); n > maxTopicAttributes {
		return fmt.Errorf("a topic has %d attributes, at most %d", n, maxTopicAttributes)
	}
	return json.Unmarshal(b, (*map[string]string)(a))
}

// withDefaults applies TopicConfig's defaults: 16 read and write queues,
// read-write, SINGLE_TAG.
func (t *topicConfigJSON) withDefaults() TopicConfig {
	tc := TopicConfig{TopicName: t.TopicName, ReadQueueNums: 16, WriteQueueNums: 16, Perm: PermRead | PermWrite,
		TopicFilterType: t.TopicFilterType, TopicSysFlag: t.TopicSysFlag, Order: t.Order, Attributes: t.Attributes}
	if t.ReadQueueNums != nil {
		tc.ReadQueueNums = *t.ReadQueueNums
	}
	if t.WriteQueueNums != nil {
		tc.WriteQueueNums = *t.WriteQueueNums
	}
	if t.Perm != nil {
		tc.Perm = *t.Perm
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = "SINGLE_TAG"
	}
	return tc
}

// EncodeRegisterBrokerBody is the inverse of DecodeRegisterBrokerBody, for
// brokers registering with name servers and for tests. Topics are written in
// name order so equal bodies encode to equal bytes.
func EncodeRegisterBrokerBody(body *RegisterBrokerBody, compress bool) ([]byte, error) {
	if !compress {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("wire: encode register broker body: %w", err)
		}
		return b, nil
	}
	// The raw body is built in one buffer and compressed with one Write.
	// Default compression, not RocketMQ's BEST_COMPRESSION: on topic
	// tables it is several times cheaper for a few percent more bytes,
	// and a broker encodes its table on every registration round. Any
	// level inflates the same way on the name server.
	table := body.TopicConfigSerializeWrapper.TopicConfigTable
	raw := make([]byte, 0, 256+64*len(table))
	dv, _ := json.Marshal(body.TopicConfigSerializeWrapper.DataVersion)
	raw = appendRegisterItem(raw, dv)
	raw = binary.BigEndian.AppendUint32(raw, uint32(len(table)))
	for _, name := range sortedStringKeys(table) {
		at := len(raw)
		raw = appendCompactTopicConfig(append(raw, 0, 0, 0, 0), table[name])
		binary.BigEndian.PutUint32(raw[at:], uint32(len(raw)-at-4))
	}
	fs := body.FilterServerList
	if fs == nil {
		fs = []string{}
	}
	fsb, _ := json.Marshal(fs)
	raw = appendRegisterItem(raw, fsb)
	raw = binary.BigEndian.AppendUint32(raw, 0) // empty topic-queue-mapping section, as a 5.0 broker writes
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendRegisterItem(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// appendCompactTopicConfig appends RocketMQ's TopicConfig.encode():
// space-separated fields, attributes as JSON last.
func appendCompactTopicConfig(dst []byte, tc TopicConfig) []byte {
	filter := tc.TopicFilterType
	if filter == "" {
		filter = "SINGLE_TAG"
	}
	dst = append(dst, tc.TopicName...)
	for _, n := range []int{tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm} {
		dst = strconv.AppendInt(append(dst, ' '), int64(n), 10)
	}
	dst = append(append(append(dst, ' '), filter...), ' ')
	if len(tc.Attributes) == 0 {
		return append(dst, "{}"...)
	}
	a, _ := json.Marshal(tc.Attributes)
	return append(dst, a...)
}

func parseCompactTopicConfig(s string) (TopicConfig, error) {
	// At most 6 parts: the attributes JSON may hold spaces, and a field
	// per space of a long item would cost a string header per byte.
	parts := strings.SplitN(s, " ", 6)
	if len(parts) < 5 {
		return TopicConfig{}, fmt.Errorf("%w: topic config %s has %d fields, want at least 5", ErrBadBody, quoteClipped(s), len(parts))
	}
	tc := TopicConfig{TopicName: parts[0], TopicFilterType: parts[4]}
	var err error
	nums := []*int{&tc.ReadQueueNums, &tc.WriteQueueNums, &tc.Perm}
	for i, dst := range nums {
		if *dst, err = strconv.Atoi(parts[i+1]); err != nil {
			return TopicConfig{}, fmt.Errorf("%w: topic config %s field %d: %s is not an integer", ErrBadBody, quoteClipped(s), i+1, quoteClipped(parts[i+1]))
		}
	}
	if len(parts) == 6 {
		if n := jsonEntries([]byte(parts[5])); n > maxTopicAttributes {
			return TopicConfig{}, fmt.Errorf("%w: topic %s has %d attributes, at most %d", ErrBadBody, quoteClipped(tc.TopicName), n, maxTopicAttributes)
		}
		// Like RocketMQ, ignore attributes that do not parse.
		_ = json.Unmarshal([]byte(parts[5]), &tc.Attributes)
	}
	return tc, nil
}

// quoteClipped quotes at most the first 64 bytes of s for an error
// message: an item may be megabytes, and the error becomes a response's
// remark.
func quoteClipped(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:most], len(s))
}

func readRegisterInt32(r io.Reader, what string) (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: compressed register broker body: reading %s length: %v", ErrBadBody, what, err)
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// inflateLimit is a reader that fails once more than left bytes were
// read: a compressed body that inflates past maxRegisterInflated is
// refused instead of decoded.
type inflateLimit struct {
	r    io.Reader
	left int64
}

func (l *inflateLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, fmt.Errorf("%w: compressed register broker body inflates past %d MiB", ErrBadBody, maxRegisterInflated>>20)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func readRegisterItem(r io.Reader, what string) ([]byte, error) {
	n, err := readRegisterInt32(r, what)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > maxRegisterItem {
		return nil, fmt.Errorf("%w: compressed register broker body: %s length %d out of range", ErrBadBody, what, n)
	}
	// Grown as the bytes arrive rather than allocated at the claimed
	// length: a 20-byte body claiming a 16 MiB item allocates nothing big.
	var b bytes.Buffer
	if _, err := io.CopyN(&b, r, int64(n)); err != nil {
		return nil, fmt.Errorf("%w: compressed register broker body: reading %s: %v", ErrBadBody, what, err)
	}
	return b.Bytes(), nil
}
