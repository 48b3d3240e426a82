package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The stored-message format (RocketMQ CommitLog / MessageDecoder): what a
// broker writes to its CommitLog and serves in pull, query and view
// answers, and what the SDK decodes. One entry, big-endian:
//
//	TOTALSIZE i32 · MAGICCODE i32 · BODYCRC i32 · QUEUEID i32 · FLAG i32 ·
//	QUEUEOFFSET i64 · PHYSICALOFFSET i64 · SYSFLAG i32 · BORNTIMESTAMP i64 ·
//	BORNHOST (4 or 16 bytes + port i32) · STORETIMESTAMP i64 ·
//	STOREHOST (4 or 16 bytes + port i32) · RECONSUMETIMES i32 ·
//	PREPAREDTRANSACTIONOFFSET i64 · BODYLEN i32 + body ·
//	TOPICLEN (i8 for MagicV1, i16 for MagicV2) + topic · PROPLEN i16 + properties
//
// AppendMessage and DecodeMessage are the strict codec the store writes
// and checks its CommitLog with (every entry ends with the whole-entry CRC
// property); DecodeEntry is the lenient reader a client uses on whatever
// a broker sends.

// Stored-message magic codes (RocketMQ MessageDecoder / CommitLog).
const (
	// MagicV1 marks a stored message with a 1-byte topic length and is what the
	// official Go client can decode; used for topics of at most 127 bytes.
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a stored message with a 2-byte topic length (longer topics).
	MagicV2 uint32 = 0xDAA320AB
	// MagicBlank marks the filler at the end of a CommitLog segment when the
	// next message does not fit; its TOTALSIZE is the rest of the segment. A
	// decoder that meets it has reached the end of the messages.
	MagicBlank uint32 = 0xCBD43194
)

// SysFlag bits (RocketMQ MessageSysFlag).
const (
	SysFlagCompressed    int32 = 0x1
	SysFlagMultiTags     int32 = 0x2
	SysFlagTransPrepared int32 = 0x4
	SysFlagTransCommit   int32 = 0x8
	SysFlagTransRollback int32 = 0xC
	SysFlagTransMask     int32 = 0xC
	SysFlagBornHostV6    int32 = 0x10
	SysFlagStoreHostV6   int32 = 0x20
	// SysFlagCompressionType holds the codec of a compressed body in bits
	// 8–10: 0 (older clients) and 3 mean zlib, 1 LZ4, 2 zstd.
	SysFlagCompressionType int32 = 0x7 << 8

	sysFlagHostsV6Mask = SysFlagBornHostV6 | SysFlagStoreHostV6
)

// Separators of a properties string: name\x01value\x02 per property.
const (
	PropertyNameSeparator = '\x01'
	PropertySeparator     = '\x02'
)

// Property keys the format itself reads (RocketMQ MessageConst).
const (
	PropertyKeys    = "KEYS"
	PropertyTags    = "TAGS"
	PropertyUniqKey = "UNIQ_KEY"
	// PropertyCRC32 is the property holding the whole-entry checksum that the
	// encoder appends as the last property (like RocketMQ 5's optional
	// "__CRC32#"): BODYCRC only covers the body, this covers the header,
	// topic and properties too, so a flipped bit anywhere is detected.
	PropertyCRC32 = "__CRC32#"
)

// CRCPropLen is the size of the CRC property: name, \x01, 10 decimal
// digits, \x02. crcDigitsFromEnd locates the digits from the entry's end.
const (
	CRCPropLen       = len(PropertyCRC32) + 1 + 10 + 1
	crcDigitsFromEnd = 11
)

// Field offsets that do not depend on the host address families.
const (
	OffTotalSize      = 0
	OffMagic          = 4
	OffBodyCRC        = 8
	OffQueueID        = 12
	OffFlag           = 16
	OffQueueOffset    = 20
	OffPhysicalOffset = 28
	OffSysFlag        = 36
	OffBornTimestamp  = 40
	OffBornHost       = 48
	// BlankHeaderSize is the smallest blank filler (TOTALSIZE + MAGIC): every
	// segment keeps at least this much room so a filler can always be written
	// (RocketMQ END_FILE_MIN_BLANK_LENGTH).
	BlankHeaderSize = 8
	// MinMessageSize is the size of a V1 IPv4 message with empty body, a
	// 0-length topic and no properties.
	MinMessageSize = 84 + 4 + 1 + 2
	// MaxTopicLen is the longest topic the V2 format can hold (int16 length).
	MaxTopicLen = 32767
	// MaxV1TopicLen is the longest topic written as V1 (signed byte length).
	MaxV1TopicLen = 127
	// MaxPropertiesLen is the longest properties string (int16 length).
	MaxPropertiesLen = 32767
)

// Message is a message as a broker stores it (RocketMQ MessageExt).
type Message struct {
	Topic      string
	QueueID    int32
	Flag       int32
	Body       []byte
	Properties map[string]string
	// EncodedProperties, when not empty, is what AppendMessage and
	// EncodedSize store instead of encoding Properties (which they then do
	// not read and may be nil): the properties already in stored order, as
	// CanonicalProperties renders them. A broker's send processor sets it
	// straight from the request's properties string so the per-message map
	// is never built.
	EncodedProperties         string
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	QueueOffset               int64
	PhysicalOffset            int64
	StoreTimestamp            int64
	// BodyCRC is crc32 IEEE of Body masked to 31 bits (RocketMQ UtilAll.crc32).
	BodyCRC   uint32
	StoreSize int32
}

// Property returns one property, from Properties or, when that is nil,
// from EncodedProperties.
func (m *Message) Property(name string) string {
	if m.Properties == nil && m.EncodedProperties != "" {
		return encodedPropertyValue(m.EncodedProperties, name)
	}
	return m.Properties[name]
}

// Tags returns the TAGS property.
func (m *Message) Tags() string { return m.Property(PropertyTags) }

// Keys returns the KEYS property split on spaces.
func (m *Message) Keys() []string { return strings.Fields(m.Property(PropertyKeys)) }

// UniqKey returns the client-side message id (UNIQ_KEY property).
func (m *Message) UniqKey() string { return m.Property(PropertyUniqKey) }

// MsgID returns the offset message id of a stored message.
func (m *Message) MsgID() string { return OffsetMsgID(m.StoreHost, m.PhysicalOffset) }

// TagsHashCode returns the ConsumeQueue tags code of a tag: Java's
// String.hashCode over UTF-16 code units, sign-extended to int64, 0 for "".
// Invalid UTF-8 counts as U+FFFD per bad byte, like Java's lenient decoder.
func TagsHashCode(tags string) int64 {
	var h int32
	for _, r := range tags {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

// EncodeProperties renders properties as RocketMQ does (name\x01value\x02 ...),
// sorted by name so the same message always encodes to the same bytes.
func EncodeProperties(props map[string]string) string {
	if len(props) == 0 {
		return ""
	}
	keys := make([]string, 0, len(props))
	n := 0
	for k, v := range props {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	var b strings.Builder
	b.Grow(n)
	writeSortedProperties(&b, props, keys)
	return b.String()
}

// writeSortedProperties sorts keys and writes name\x01value\x02 for each.
func writeSortedProperties(b *strings.Builder, props map[string]string, keys []string) {
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(PropertyNameSeparator)
		b.WriteString(props[k])
		b.WriteByte(PropertySeparator)
	}
}

// ParseProperties parses a properties string; malformed pairs are skipped.
func ParseProperties(s string) map[string]string {
	props := map[string]string{}
	for len(s) > 0 {
		var item string
		if i := strings.IndexByte(s, PropertySeparator); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			item, s = s, ""
		}
		if j := strings.IndexByte(item, PropertyNameSeparator); j >= 0 {
			props[item[:j]] = item[j+1:]
		}
	}
	return props
}

// DecodeProperties parses a properties string with the rules of the Java
// client's MessageDecoder.string2messageProperties, which a client applies
// to what it pulls: pairs are split at \x02, a pair needs a non-empty name
// and a non-empty value around its first \x01, and anything else is
// skipped rather than failing the message. (ParseProperties, the broker's,
// keeps empty values.)
func DecodeProperties(s string) map[string]string {
	m := make(map[string]string)
	for len(s) > 0 {
		item := s
		if i := strings.IndexByte(s, PropertySeparator); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if k := strings.IndexByte(item, PropertyNameSeparator); k > 0 && k < len(item)-1 {
			m[item[:k]] = item[k+1:]
		}
	}
	return m
}

// CanonicalProperties renders a properties string as the stored format
// holds it, without building a map: the same pairs EncodeProperties(
// ParseProperties(s)) gives (malformed pairs skipped, the last of equal
// names wins, sorted by name) minus any CRC property, which the encoder
// appends itself. s itself is returned when it is already in that form —
// one well-formed pair per separator, names ascending, a separator at the
// end (the raftmq SDK's usual single-property send) — else one new string.
func CanonicalProperties(s string) string {
	if s == "" {
		return ""
	}
	var arr [16]propPair
	pairs := arr[:0]
	canonical := s[len(s)-1] == PropertySeparator
	n := 0
	for rest := s; len(rest) > 0; {
		var item string
		if i := strings.IndexByte(rest, PropertySeparator); i >= 0 {
			item, rest = rest[:i], rest[i+1:]
		} else {
			item, rest = rest, ""
		}
		j := strings.IndexByte(item, PropertyNameSeparator)
		if j < 0 {
			canonical = false // skipped, like ParseProperties does
			continue
		}
		p := propPair{item[:j], item[j+1:]}
		if p.name == PropertyCRC32 || (len(pairs) > 0 && pairs[len(pairs)-1].name >= p.name) {
			canonical = false
		}
		pairs = append(pairs, p)
		n += len(item) + 1
	}
	if canonical {
		return s
	}
	// Equal names keep their order under a stable sort; the last wins.
	slices.SortStableFunc(pairs, func(a, b propPair) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.Grow(n)
	for i, p := range pairs {
		if p.name == PropertyCRC32 || (i+1 < len(pairs) && pairs[i+1].name == p.name) {
			continue
		}
		b.WriteString(p.name)
		b.WriteByte(PropertyNameSeparator)
		b.WriteString(p.value)
		b.WriteByte(PropertySeparator)
	}
	return b.String()
}

// propPair is one name\x01value pair of a properties string.
type propPair struct{ name, value string }

// encodedPropertyValue is PropertyValue over a string.
func encodedPropertyValue(props, name string) string {
	for len(props) > 0 {
		var item string
		if i := strings.IndexByte(props, PropertySeparator); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			item, props = props, ""
		}
		if j := strings.IndexByte(item, PropertyNameSeparator); j >= 0 && item[:j] == name {
			return item[j+1:]
		}
	}
	return ""
}

// PropertyValue finds one property in an encoded properties string without
// building the map (dispatch hot path).
func PropertyValue(props []byte, name string) string {
	return string(PropertyBytes(props, name))
}

// PropertyBytes is PropertyValue without the string copy.
func PropertyBytes(props []byte, name string) []byte {
	for len(props) > 0 {
		var item []byte
		if i := indexByte(props, PropertySeparator); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			item, props = props, nil
		}
		if j := indexByte(item, PropertyNameSeparator); j >= 0 && string(item[:j]) == name {
			return item[j+1:]
		}
	}
	return nil
}

// TagsHashCodeBytes is TagsHashCode of string(b) without the copy.
func TagsHashCodeBytes(b []byte) int64 {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return TagsHashCode(string(b))
		}
	}
	var h int32
	for _, c := range b {
		h = 31*h + int32(c)
	}
	return int64(h)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func hostLen(sysFlag, bit int32) int {
	if sysFlag&bit != 0 {
		return 20
	}
	return 8
}

// StoreTimestampOffset returns where STORETIMESTAMP sits for a sysFlag.
func StoreTimestampOffset(sysFlag int32) int {
	return OffBornHost + hostLen(sysFlag, SysFlagBornHostV6)
}

// messageSize returns the encoded size of a message with the given parts.
func messageSize(sysFlag int32, bodyLen, topicLen, propsLen int) int {
	topicLenSize := 1
	if topicLen > MaxV1TopicLen {
		topicLenSize = 2
	}
	return OffBornHost + hostLen(sysFlag, SysFlagBornHostV6) + 8 + hostLen(sysFlag, SysFlagStoreHostV6) +
		4 + 8 + 4 + bodyLen + topicLenSize + topicLen + 2 + propsLen
}

// hostSysFlag returns sysFlag with the IPv6 bits set from the host addresses.
func hostSysFlag(m *Message) int32 {
	f := m.SysFlag &^ sysFlagHostsV6Mask
	if a := m.BornHost.Addr().Unmap(); a.Is6() {
		f |= SysFlagBornHostV6
	}
	if a := m.StoreHost.Addr().Unmap(); a.Is6() {
		f |= SysFlagStoreHostV6
	}
	return f
}

// EncodedSize returns the stored size of m, or an error wrapping
// ErrMessageIllegal if the topic or properties cannot be encoded.
func EncodedSize(m *Message) (int, error) {
	if m.EncodedProperties != "" {
		return EncodedSizeWith(m, len(m.EncodedProperties)+CRCPropLen)
	}
	props := StoredProperties(m.Properties)
	return EncodedSizeWith(m, len(props))
}

// StoredProperties encodes props for storage: sorted, with any caller-set
// CRC property dropped and a zero CRC property appended (sealed later). It
// builds the string with one allocation (put hot path).
func StoredProperties(props map[string]string) string {
	var arr [16]string
	keys := arr[:0]
	n := CRCPropLen
	for k, v := range props {
		if k == PropertyCRC32 {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	var b strings.Builder
	b.Grow(n)
	writeSortedProperties(&b, props, keys)
	b.WriteString(crcPlaceholder)
	return b.String()
}

// queueOffsetField is where QUEUEOFFSET sits in every stored message
// (after TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID and FLAG).
const queueOffsetField, queueOffsetLen = 20, 8

// EntryCRC computes the whole-entry checksum of an encoded message with a
// CRC property: every byte but the digits themselves and QUEUEOFFSET.
// QUEUEOFFSET is left out because it is not authoritative in the CommitLog
// (the ConsumeQueue is: in Raft mode offsets are assigned at Apply) and the
// pull path patches it into the copies it serves; a copy handed to a
// consumer, a schedule service or a re-put must still verify.
func EntryCRC(b []byte) uint32 {
	end := len(b) - crcDigitsFromEnd
	c := crc32.ChecksumIEEE(b[:queueOffsetField])
	c = crc32.Update(c, crc32.IEEETable, b[queueOffsetField+queueOffsetLen:end])
	return c & 0x7FFFFFFF
}

// HasCRCProperty reports whether the encoded message b ends with a CRC property.
func HasCRCProperty(b []byte) bool {
	if len(b) < MinMessageSize+CRCPropLen {
		return false
	}
	tail := b[len(b)-CRCPropLen:]
	return string(tail[:len(PropertyCRC32)]) == PropertyCRC32 && tail[len(PropertyCRC32)] == PropertyNameSeparator &&
		tail[CRCPropLen-1] == PropertySeparator
}

// SealCRC writes the whole-entry checksum into an encoded message's CRC
// property. The CommitLog calls it after patching PHYSICALOFFSET and
// STORETIMESTAMP. No-op for messages without the property.
func SealCRC(b []byte) {
	if !HasCRCProperty(b) {
		return
	}
	v := EntryCRC(b)
	d := b[len(b)-crcDigitsFromEnd : len(b)-1]
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
}

// storedCRC parses the digits of an encoded message's CRC property.
func storedCRC(b []byte) (uint32, bool) {
	var v uint64
	for _, c := range b[len(b)-crcDigitsFromEnd : len(b)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return uint32(v), v <= 0x7FFFFFFF
}

func EncodedSizeWith(m *Message, propsLen int) (int, error) {
	if len(m.Topic) > MaxTopicLen {
		return 0, fmt.Errorf("%w: topic is %d bytes, limit %d", ErrMessageIllegal, len(m.Topic), MaxTopicLen)
	}
	if propsLen > MaxPropertiesLen {
		return 0, fmt.Errorf("%w: properties are %d bytes, limit %d", ErrMessageIllegal, propsLen, MaxPropertiesLen)
	}
	return messageSize(hostSysFlag(m), len(m.Body), len(m.Topic), propsLen), nil
}

// AppendMessage appends m in stored format to dst and returns the extended
// slice. It sets m.SysFlag's host bits, m.BodyCRC and m.StoreSize.
// QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are written from m as they
// are; the CommitLog overwrites the last two in place when it appends.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	props, crc := m.EncodedProperties, true
	if props == "" {
		props, crc = StoredProperties(m.Properties), false
	}
	propsLen := len(props)
	if crc {
		propsLen += CRCPropLen
	}
	size, err := EncodedSizeWith(m, propsLen)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, size)[:start+size]
	EncodeWith(dst[start:], m, props, crc)
	return dst, nil
}

// crcPlaceholder is the CRC property before SealCRC fills in the digits.
const crcPlaceholder = PropertyCRC32 + "\x010000000000\x02"

// EncodeWith writes m into b, which has exactly the encoded size
// (EncodedSizeWith); props is the whole stored properties block
// (StoredProperties) or, with crc set, the properties without the CRC
// property: then the placeholder is written after props (EncodedProperties).
// The CRC property, if present, is sealed.
func EncodeWith(b []byte, m *Message, props string, crc bool) {
	be := binary.BigEndian
	m.SysFlag = hostSysFlag(m)
	m.BodyCRC = BodyCRC32(m.Body)
	m.StoreSize = int32(len(b))
	magic := MagicV1
	if len(m.Topic) > MaxV1TopicLen {
		magic = MagicV2
	}
	be.PutUint32(b[OffTotalSize:], uint32(len(b)))
	be.PutUint32(b[OffMagic:], magic)
	be.PutUint32(b[OffBodyCRC:], m.BodyCRC)
	be.PutUint32(b[OffQueueID:], uint32(m.QueueID))
	be.PutUint32(b[OffFlag:], uint32(m.Flag))
	be.PutUint64(b[OffQueueOffset:], uint64(m.QueueOffset))
	be.PutUint64(b[OffPhysicalOffset:], uint64(m.PhysicalOffset))
	be.PutUint32(b[OffSysFlag:], uint32(m.SysFlag))
	be.PutUint64(b[OffBornTimestamp:], uint64(m.BornTimestamp))
	p := OffBornHost
	p += putHost(b[p:], m.BornHost, m.SysFlag&SysFlagBornHostV6 != 0)
	be.PutUint64(b[p:], uint64(m.StoreTimestamp))
	p += 8
	p += putHost(b[p:], m.StoreHost, m.SysFlag&SysFlagStoreHostV6 != 0)
	be.PutUint32(b[p:], uint32(m.ReconsumeTimes))
	p += 4
	be.PutUint64(b[p:], uint64(m.PreparedTransactionOffset))
	p += 8
	be.PutUint32(b[p:], uint32(len(m.Body)))
	p += 4
	p += copy(b[p:], m.Body)
	if magic == MagicV1 {
		b[p] = byte(len(m.Topic))
		p++
	} else {
		be.PutUint16(b[p:], uint16(len(m.Topic)))
		p += 2
	}
	p += copy(b[p:], m.Topic)
	propsLen := len(props)
	if crc {
		propsLen += CRCPropLen
	}
	be.PutUint16(b[p:], uint16(propsLen))
	p += 2
	p += copy(b[p:], props)
	if crc {
		copy(b[p:], crcPlaceholder)
	}
	SealCRC(b)
}

func putHost(b []byte, ap netip.AddrPort, v6 bool) int {
	a := ap.Addr().Unmap()
	if v6 {
		ip := a.As16()
		copy(b, ip[:])
		binary.BigEndian.PutUint32(b[16:], uint32(ap.Port()))
		return 20
	}
	var ip [4]byte
	if a.Is4() {
		ip = a.As4()
	}
	copy(b, ip[:])
	binary.BigEndian.PutUint32(b[4:], uint32(ap.Port()))
	return 8
}

func getHost(b []byte, v6 bool) (netip.AddrPort, int) {
	if v6 {
		ip := netip.AddrFrom16([16]byte(b[:16]))
		return netip.AddrPortFrom(ip, uint16(binary.BigEndian.Uint32(b[16:]))), 20
	}
	ip := netip.AddrFrom4([4]byte(b[:4]))
	return netip.AddrPortFrom(ip, uint16(binary.BigEndian.Uint32(b[4:]))), 8
}

// EntryLayout holds the positions of the variable fields of one stored
// message, found by CheckEntry.
type EntryLayout struct {
	// Size is TOTALSIZE: the entry's (or blank filler's) length in bytes.
	Size int
	// Magic is MagicV1, MagicV2 or MagicBlank.
	Magic uint32
	// SysFlag is the stored SYSFLAG.
	SysFlag int32
	// BodyStart and BodyLen locate the body in the entry.
	BodyStart int
	BodyLen   int
	// Topic and Props alias the entry's topic and properties bytes.
	Topic []byte
	Props []byte
}

// CheckEntry validates the stored message at the start of b: TOTALSIZE
// within bounds, a known magic, field lengths that add up to TOTALSIZE and,
// if checkCRC, the entry CRC. A blank filler is reported by its magic with
// size = its TOTALSIZE. An all-zero header is ErrEndOfData.
func CheckEntry(b []byte, checkCRC bool) (EntryLayout, error) {
	var l EntryLayout
	if len(b) < BlankHeaderSize {
		return l, fmt.Errorf("%w: %d bytes left, need a header", ErrCorruptMessage, len(b))
	}
	be := binary.BigEndian
	size := int(int32(be.Uint32(b[OffTotalSize:])))
	magic := be.Uint32(b[OffMagic:])
	if size == 0 && magic == 0 {
		return l, ErrEndOfData
	}
	l.Size, l.Magic = size, magic
	switch magic {
	case MagicBlank:
		if size < BlankHeaderSize || size > len(b) {
			return l, fmt.Errorf("%w: blank filler of %d bytes with %d left", ErrCorruptMessage, size, len(b))
		}
		return l, nil
	case MagicV1, MagicV2:
	default:
		return l, fmt.Errorf("%w: bad magic %#08x", ErrCorruptMessage, magic)
	}
	if size < MinMessageSize || size > len(b) {
		return l, fmt.Errorf("%w: TOTALSIZE %d out of bounds (%d bytes left)", ErrCorruptMessage, size, len(b))
	}
	b = b[:size]
	l.SysFlag = int32(be.Uint32(b[OffSysFlag:]))
	p := OffBornHost + hostLen(l.SysFlag, SysFlagBornHostV6) + 8 + hostLen(l.SysFlag, SysFlagStoreHostV6) + 4 + 8
	if p+4 > size {
		return l, fmt.Errorf("%w: header of %d bytes exceeds TOTALSIZE %d", ErrCorruptMessage, p+4, size)
	}
	bodyLen := int(int32(be.Uint32(b[p:])))
	p += 4
	if bodyLen < 0 || bodyLen > size-p {
		return l, fmt.Errorf("%w: BODYLEN %d exceeds TOTALSIZE %d", ErrCorruptMessage, bodyLen, size)
	}
	l.BodyStart, l.BodyLen = p, bodyLen
	p += bodyLen
	var topicLen int
	if magic == MagicV1 {
		if p+1 > size {
			return l, fmt.Errorf("%w: truncated topic length", ErrCorruptMessage)
		}
		topicLen = int(b[p])
		p++
	} else {
		if p+2 > size {
			return l, fmt.Errorf("%w: truncated topic length", ErrCorruptMessage)
		}
		topicLen = int(int16(be.Uint16(b[p:])))
		p += 2
	}
	if topicLen < 0 || p+topicLen+2 > size {
		return l, fmt.Errorf("%w: topic length %d exceeds TOTALSIZE %d", ErrCorruptMessage, topicLen, size)
	}
	l.Topic = b[p : p+topicLen]
	p += topicLen
	propsLen := int(int16(be.Uint16(b[p:])))
	p += 2
	if propsLen < 0 || p+propsLen != size {
		return l, fmt.Errorf("%w: fields add up to %d bytes, TOTALSIZE says %d", ErrCorruptMessage, p+max(propsLen, 0), size)
	}
	l.Props = b[p:size]
	if checkCRC {
		// The entry CRC covers every byte, BODYCRC and body included, so
		// it alone proves the entry is as sealed; DecodeMessage also checks
		// BODYCRC. Every entry this package encodes ends with the CRC property, so its
		// absence is damage too (a flipped bit in the property's name).
		if !HasCRCProperty(b) {
			return l, fmt.Errorf("%w: entry CRC property missing", ErrCorruptMessage)
		}
		stored, ok := storedCRC(b)
		if got := EntryCRC(b); !ok || got != stored {
			return l, fmt.Errorf("%w: entry CRC %d, stored %q", ErrCorruptMessage, got, b[len(b)-crcDigitsFromEnd:len(b)-1])
		}
	}
	return l, nil
}

// DecodeMessage decodes the stored message at the start of b, checking magic,
// sizes, body CRC and entry CRC (so it only accepts entries this package
// encoded), and returns it with its size. Body aliases b unless
// copyBody is set. A blank filler or zeros is an error (ErrCorruptMessage,
// ErrEndOfData): callers decode only where a message is expected.
func DecodeMessage(b []byte, copyBody bool) (*Message, int, error) {
	l, err := CheckEntry(b, true)
	if err != nil {
		return nil, 0, err
	}
	if l.Magic == MagicBlank {
		return nil, 0, fmt.Errorf("%w: blank filler where a message was expected", ErrCorruptMessage)
	}
	be := binary.BigEndian
	if want, got := be.Uint32(b[OffBodyCRC:]), BodyCRC32(b[l.BodyStart:l.BodyStart+l.BodyLen]); got != want {
		return nil, 0, fmt.Errorf("%w: body CRC %#x, stored %#x", ErrCorruptMessage, got, want)
	}
	m := &Message{
		StoreSize:      int32(l.Size),
		BodyCRC:        be.Uint32(b[OffBodyCRC:]),
		QueueID:        int32(be.Uint32(b[OffQueueID:])),
		Flag:           int32(be.Uint32(b[OffFlag:])),
		QueueOffset:    int64(be.Uint64(b[OffQueueOffset:])),
		PhysicalOffset: int64(be.Uint64(b[OffPhysicalOffset:])),
		SysFlag:        l.SysFlag,
		BornTimestamp:  int64(be.Uint64(b[OffBornTimestamp:])),
	}
	p := OffBornHost
	var n int
	m.BornHost, n = getHost(b[p:], l.SysFlag&SysFlagBornHostV6 != 0)
	p += n
	m.StoreTimestamp = int64(be.Uint64(b[p:]))
	p += 8
	m.StoreHost, n = getHost(b[p:], l.SysFlag&SysFlagStoreHostV6 != 0)
	p += n
	m.ReconsumeTimes = int32(be.Uint32(b[p:]))
	p += 4
	m.PreparedTransactionOffset = int64(be.Uint64(b[p:]))
	m.Body = b[l.BodyStart : l.BodyStart+l.BodyLen : l.BodyStart+l.BodyLen]
	if copyBody {
		m.Body = slices.Clone(m.Body)
	}
	m.Topic = string(l.Topic)
	m.Properties = ParseProperties(string(l.Props))
	delete(m.Properties, PropertyCRC32)
	return m, l.Size, nil
}

// PatchQueueOffset writes QUEUEOFFSET into an encoded message (the pull path
// patches a copy with the ConsumeQueue position).
func PatchQueueOffset(msg []byte, queueOffset int64) {
	binary.BigEndian.PutUint64(msg[OffQueueOffset:], uint64(queueOffset))
}

// PatchStored writes PHYSICALOFFSET and STORETIMESTAMP into an encoded
// message in place and reseals its entry CRC (the CommitLog does it when
// appending).
func PatchStored(msg []byte, physicalOffset, storeTimestamp int64) {
	be := binary.BigEndian
	be.PutUint64(msg[OffPhysicalOffset:], uint64(physicalOffset))
	sysFlag := int32(be.Uint32(msg[OffSysFlag:]))
	be.PutUint64(msg[StoreTimestampOffset(sysFlag):], uint64(storeTimestamp))
	SealCRC(msg)
}
