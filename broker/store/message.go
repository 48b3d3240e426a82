package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Stored-message magic codes (RocketMQ MessageDecoder / CommitLog).
const (
	// MagicV1 marks a stored message with a 1-byte topic length and is what the
	// official Go client can decode; used for topics of at most 127 bytes.
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a stored message with a 2-byte topic length (longer topics).
	MagicV2 uint32 = 0xDAA320AB
	// MagicBlank marks the filler at the end of a CommitLog segment when the
	// next message does not fit; its TOTALSIZE is the rest of the segment.
	MagicBlank uint32 = 0xCBD43194
)

// SysFlag bits (RocketMQ MessageSysFlag).
const (
	SysFlagCompressed     int32 = 0x1
	SysFlagMultiTags      int32 = 0x2
	SysFlagTransPrepared  int32 = 0x4
	SysFlagTransCommit    int32 = 0x8
	SysFlagTransRollback  int32 = 0xC
	SysFlagTransMask      int32 = 0xC
	SysFlagBornHostV6     int32 = 0x10
	SysFlagStoreHostV6    int32 = 0x20
	sysFlagHostsV6Mask    int32 = SysFlagBornHostV6 | SysFlagStoreHostV6
	propertyNameSeparator       = '\x01'
	propertySeparator           = '\x02'
)

// Property keys used by the store (RocketMQ MessageConst).
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

// crcPropLen is the size of the CRC property: name, \x01, 10 decimal
// digits, \x02. crcDigitsFromEnd locates the digits from the entry's end.
const (
	crcPropLen       = len(PropertyCRC32) + 1 + 10 + 1
	crcDigitsFromEnd = 11
)

// Field offsets that do not depend on the host address families.
const (
	offTotalSize      = 0
	offMagic          = 4
	offBodyCRC        = 8
	offQueueID        = 12
	offFlag           = 16
	offQueueOffset    = 20
	offPhysicalOffset = 28
	offSysFlag        = 36
	offBornTimestamp  = 40
	offBornHost       = 48
	// BlankHeaderSize is the smallest blank filler (TOTALSIZE + MAGIC): every
	// segment keeps at least this much room so a filler can always be written
	// (RocketMQ END_FILE_MIN_BLANK_LENGTH).
	BlankHeaderSize = 8
	// minMessageSize is the size of a V1 IPv4 message with empty body, a
	// 0-length topic and no properties.
	minMessageSize = 84 + 4 + 1 + 2
	// maxTopicLen is the longest topic the V2 format can hold (int16 length).
	maxTopicLen = 32767
	// maxV1TopicLen is the longest topic written as V1 (signed byte length).
	maxV1TopicLen = 127
	// maxPropertiesLen is the longest properties string (int16 length).
	maxPropertiesLen = 32767
)

// Message is a message as stored in the CommitLog (RocketMQ MessageExt).
type Message struct {
	Topic      string
	QueueID    int32
	Flag       int32
	Body       []byte
	Properties map[string]string
	// EncodedProperties, when not empty, is what AppendMessage and
	// EncodedSize store instead of encoding Properties (which they then do
	// not read and may be nil): the properties already in stored order, as
	// CanonicalProperties renders them. The send processor sets it straight
	// from the request's properties string so the per-message map is never
	// built. CommitLog.PutMessages honours it too.
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

// BodyCRC32 computes RocketMQ's body checksum: crc32 IEEE masked with
// 0x7FFFFFFF (UtilAll.crc32 returns a non-negative Java int).
func BodyCRC32(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

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
		b.WriteByte(propertyNameSeparator)
		b.WriteString(props[k])
		b.WriteByte(propertySeparator)
	}
}

// ParseProperties parses a properties string; malformed pairs are skipped.
func ParseProperties(s string) map[string]string {
	props := map[string]string{}
	for len(s) > 0 {
		var item string
		if i := strings.IndexByte(s, propertySeparator); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			item, s = s, ""
		}
		if j := strings.IndexByte(item, propertyNameSeparator); j >= 0 {
			props[item[:j]] = item[j+1:]
		}
	}
	return props
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
	canonical := s[len(s)-1] == propertySeparator
	n := 0
	for rest := s; len(rest) > 0; {
		var item string
		if i := strings.IndexByte(rest, propertySeparator); i >= 0 {
			item, rest = rest[:i], rest[i+1:]
		} else {
			item, rest = rest, ""
		}
		j := strings.IndexByte(item, propertyNameSeparator)
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
		b.WriteByte(propertyNameSeparator)
		b.WriteString(p.value)
		b.WriteByte(propertySeparator)
	}
	return b.String()
}

// propPair is one name\x01value pair of a properties string.
type propPair struct{ name, value string }

// encodedPropertyValue is propertyValue over a string.
func encodedPropertyValue(props, name string) string {
	for len(props) > 0 {
		var item string
		if i := strings.IndexByte(props, propertySeparator); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			item, props = props, ""
		}
		if j := strings.IndexByte(item, propertyNameSeparator); j >= 0 && item[:j] == name {
			return item[j+1:]
		}
	}
	return ""
}

// propertyValue finds one property in an encoded properties string without
// building the map (dispatch hot path).
func propertyValue(props []byte, name string) string {
	return string(propertyBytes(props, name))
}

// propertyBytes is propertyValue without the string copy.
func propertyBytes(props []byte, name string) []byte {
	for len(props) > 0 {
		var item []byte
		if i := indexByte(props, propertySeparator); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			item, props = props, nil
		}
		if j := indexByte(item, propertyNameSeparator); j >= 0 && string(item[:j]) == name {
			return item[j+1:]
		}
	}
	return nil
}

// tagsHashCodeBytes is TagsHashCode of string(b) without the copy.
func tagsHashCodeBytes(b []byte) int64 {
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

// storeTimestampOffset returns where STORETIMESTAMP sits for a sysFlag.
func storeTimestampOffset(sysFlag int32) int {
	return offBornHost + hostLen(sysFlag, SysFlagBornHostV6)
}

// messageSize returns the encoded size of a message with the given parts.
func messageSize(sysFlag int32, bodyLen, topicLen, propsLen int) int {
	topicLenSize := 1
	if topicLen > maxV1TopicLen {
		topicLenSize = 2
	}
	return offBornHost + hostLen(sysFlag, SysFlagBornHostV6) + 8 + hostLen(sysFlag, SysFlagStoreHostV6) +
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
		return encodedSize(m, len(m.EncodedProperties)+crcPropLen)
	}
	props := storedProperties(m.Properties)
	return encodedSize(m, len(props))
}

// storedProperties encodes props for storage: sorted, with any caller-set
// CRC property dropped and a zero CRC property appended (sealed later). It
// builds the string with one allocation (put hot path).
func storedProperties(props map[string]string) string {
	var arr [16]string
	keys := arr[:0]
	n := crcPropLen
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

// entryCRC computes the whole-entry checksum of an encoded message with a
// CRC property: every byte but the digits themselves and QUEUEOFFSET.
// QUEUEOFFSET is left out because it is not authoritative in the CommitLog
// (the ConsumeQueue is: in Raft mode offsets are assigned at Apply) and the
// pull path patches it into the copies it serves; a copy handed to a
// consumer, a schedule service or a re-put must still verify.
func entryCRC(b []byte) uint32 {
	end := len(b) - crcDigitsFromEnd
	c := crc32.ChecksumIEEE(b[:queueOffsetField])
	c = crc32.Update(c, crc32.IEEETable, b[queueOffsetField+queueOffsetLen:end])
	return c & 0x7FFFFFFF
}

// hasCRCProperty reports whether the encoded message b ends with a CRC property.
func hasCRCProperty(b []byte) bool {
	if len(b) < minMessageSize+crcPropLen {
		return false
	}
	tail := b[len(b)-crcPropLen:]
	return string(tail[:len(PropertyCRC32)]) == PropertyCRC32 && tail[len(PropertyCRC32)] == propertyNameSeparator &&
		tail[crcPropLen-1] == propertySeparator
}

// sealCRC writes the whole-entry checksum into an encoded message's CRC
// property. The CommitLog calls it after patching PHYSICALOFFSET and
// STORETIMESTAMP. No-op for messages without the property.
func sealCRC(b []byte) {
	if !hasCRCProperty(b) {
		return
	}
	v := entryCRC(b)
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

func encodedSize(m *Message, propsLen int) (int, error) {
	if len(m.Topic) > maxTopicLen {
		return 0, fmt.Errorf("%w: topic is %d bytes, limit %d", ErrMessageIllegal, len(m.Topic), maxTopicLen)
	}
	if propsLen > maxPropertiesLen {
		return 0, fmt.Errorf("%w: properties are %d bytes, limit %d", ErrMessageIllegal, propsLen, maxPropertiesLen)
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
		props, crc = storedProperties(m.Properties), false
	}
	propsLen := len(props)
	if crc {
		propsLen += crcPropLen
	}
	size, err := encodedSize(m, propsLen)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, size)[:start+size]
	encodeWith(dst[start:], m, props, crc)
	return dst, nil
}

// crcPlaceholder is the CRC property before sealCRC fills in the digits.
const crcPlaceholder = PropertyCRC32 + "\x010000000000\x02"

// encodeInto writes m into b, which has exactly the encoded size; props
// is the whole stored properties block (storedProperties).
func encodeInto(b []byte, m *Message, props string) { encodeWith(b, m, props, false) }

// encodeWith is encodeInto where props may lack the CRC property: with
// crc set, the placeholder is written after props (EncodedProperties).
func encodeWith(b []byte, m *Message, props string, crc bool) {
	be := binary.BigEndian
	m.SysFlag = hostSysFlag(m)
	m.BodyCRC = BodyCRC32(m.Body)
	m.StoreSize = int32(len(b))
	magic := MagicV1
	if len(m.Topic) > maxV1TopicLen {
		magic = MagicV2
	}
	be.PutUint32(b[offTotalSize:], uint32(len(b)))
	be.PutUint32(b[offMagic:], magic)
	be.PutUint32(b[offBodyCRC:], m.BodyCRC)
	be.PutUint32(b[offQueueID:], uint32(m.QueueID))
	be.PutUint32(b[offFlag:], uint32(m.Flag))
	be.PutUint64(b[offQueueOffset:], uint64(m.QueueOffset))
	be.PutUint64(b[offPhysicalOffset:], uint64(m.PhysicalOffset))
	be.PutUint32(b[offSysFlag:], uint32(m.SysFlag))
	be.PutUint64(b[offBornTimestamp:], uint64(m.BornTimestamp))
	p := offBornHost
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
		propsLen += crcPropLen
	}
	be.PutUint16(b[p:], uint16(propsLen))
	p += 2
	p += copy(b[p:], props)
	if crc {
		copy(b[p:], crcPlaceholder)
	}
	sealCRC(b)
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

// messageLayout holds the positions of the variable fields of one stored
// message, found by checkMessage.
type messageLayout struct {
	size      int
	magic     uint32
	sysFlag   int32
	bodyStart int
	bodyLen   int
	topic     []byte
	props     []byte
}

// checkMessage validates the stored message at the start of b: TOTALSIZE
// within bounds, a known magic, field lengths that add up to TOTALSIZE and,
// if checkCRC, the entry CRC. A blank filler is reported by its magic with
// size = its TOTALSIZE. An all-zero header is ErrEndOfData.
func checkMessage(b []byte, checkCRC bool) (messageLayout, error) {
	var l messageLayout
	if len(b) < BlankHeaderSize {
		return l, fmt.Errorf("%w: %d bytes left, need a header", ErrCorruptMessage, len(b))
	}
	be := binary.BigEndian
	size := int(int32(be.Uint32(b[offTotalSize:])))
	magic := be.Uint32(b[offMagic:])
	if size == 0 && magic == 0 {
		return l, ErrEndOfData
	}
	l.size, l.magic = size, magic
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
	if size < minMessageSize || size > len(b) {
		return l, fmt.Errorf("%w: TOTALSIZE %d out of bounds (%d bytes left)", ErrCorruptMessage, size, len(b))
	}
	b = b[:size]
	l.sysFlag = int32(be.Uint32(b[offSysFlag:]))
	p := offBornHost + hostLen(l.sysFlag, SysFlagBornHostV6) + 8 + hostLen(l.sysFlag, SysFlagStoreHostV6) + 4 + 8
	if p+4 > size {
		return l, fmt.Errorf("%w: header of %d bytes exceeds TOTALSIZE %d", ErrCorruptMessage, p+4, size)
	}
	bodyLen := int(int32(be.Uint32(b[p:])))
	p += 4
	if bodyLen < 0 || bodyLen > size-p {
		return l, fmt.Errorf("%w: BODYLEN %d exceeds TOTALSIZE %d", ErrCorruptMessage, bodyLen, size)
	}
	l.bodyStart, l.bodyLen = p, bodyLen
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
	l.topic = b[p : p+topicLen]
	p += topicLen
	propsLen := int(int16(be.Uint16(b[p:])))
	p += 2
	if propsLen < 0 || p+propsLen != size {
		return l, fmt.Errorf("%w: fields add up to %d bytes, TOTALSIZE says %d", ErrCorruptMessage, p+max(propsLen, 0), size)
	}
	l.props = b[p:size]
	if checkCRC {
		// The entry CRC covers every byte, BODYCRC and body included, so
		// it alone proves the entry is as sealed; DecodeMessage also checks
		// BODYCRC. Every entry this package encodes ends with the CRC property, so its
		// absence is damage too (a flipped bit in the property's name).
		if !hasCRCProperty(b) {
			return l, fmt.Errorf("%w: entry CRC property missing", ErrCorruptMessage)
		}
		stored, ok := storedCRC(b)
		if got := entryCRC(b); !ok || got != stored {
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
	l, err := checkMessage(b, true)
	if err != nil {
		return nil, 0, err
	}
	if l.magic == MagicBlank {
		return nil, 0, fmt.Errorf("%w: blank filler where a message was expected", ErrCorruptMessage)
	}
	be := binary.BigEndian
	if want, got := be.Uint32(b[offBodyCRC:]), BodyCRC32(b[l.bodyStart:l.bodyStart+l.bodyLen]); got != want {
		return nil, 0, fmt.Errorf("%w: body CRC %#x, stored %#x", ErrCorruptMessage, got, want)
	}
	m := &Message{
		StoreSize:      int32(l.size),
		BodyCRC:        be.Uint32(b[offBodyCRC:]),
		QueueID:        int32(be.Uint32(b[offQueueID:])),
		Flag:           int32(be.Uint32(b[offFlag:])),
		QueueOffset:    int64(be.Uint64(b[offQueueOffset:])),
		PhysicalOffset: int64(be.Uint64(b[offPhysicalOffset:])),
		SysFlag:        l.sysFlag,
		BornTimestamp:  int64(be.Uint64(b[offBornTimestamp:])),
	}
	p := offBornHost
	var n int
	m.BornHost, n = getHost(b[p:], l.sysFlag&SysFlagBornHostV6 != 0)
	p += n
	m.StoreTimestamp = int64(be.Uint64(b[p:]))
	p += 8
	m.StoreHost, n = getHost(b[p:], l.sysFlag&SysFlagStoreHostV6 != 0)
	p += n
	m.ReconsumeTimes = int32(be.Uint32(b[p:]))
	p += 4
	m.PreparedTransactionOffset = int64(be.Uint64(b[p:]))
	m.Body = b[l.bodyStart : l.bodyStart+l.bodyLen : l.bodyStart+l.bodyLen]
	if copyBody {
		m.Body = slices.Clone(m.Body)
	}
	m.Topic = string(l.topic)
	m.Properties = ParseProperties(string(l.props))
	delete(m.Properties, PropertyCRC32)
	return m, l.size, nil
}

// DispatchRequest is what the dispatcher needs from one stored message to
// build ConsumeQueue and index entries (RocketMQ DispatchRequest).
type DispatchRequest struct {
	Topic           string
	QueueID         int32
	CommitLogOffset int64
	MsgSize         int32
	TagsCode        int64
	StoreTimestamp  int64
	// ConsumeQueueOffset is the QUEUEOFFSET the appender wrote; the
	// dispatcher assigns the real one (see DESIGN notes on queue offsets).
	ConsumeQueueOffset        int64
	Keys                      string
	UniqKey                   string
	SysFlag                   int32
	BornTimestamp             int64
	PreparedTransactionOffset int64
	// Blank is set for a segment-end filler: no message, skip MsgSize bytes
	// to the next segment.
	Blank bool
}

// CheckAndDecode validates the entry at the start of buf (magic, TOTALSIZE,
// field lengths, body CRC, entry CRC) and returns its dispatch request and size. A
// blank filler returns Blank with its size. Zeros return ErrEndOfData, any
// damage ErrCorruptMessage: nothing at or past such an entry may be served.
// CommitLogOffset is the PHYSICALOFFSET field as written.
func CheckAndDecode(buf []byte) (DispatchRequest, int, error) {
	return checkAndDecode(buf, true)
}

// checkAndDecode is CheckAndDecode with the CRC checks optional (see
// ReputService.TrustFrom).
func checkAndDecode(buf []byte, checkCRC bool) (DispatchRequest, int, error) {
	l, err := checkMessage(buf, checkCRC)
	if err != nil {
		return DispatchRequest{}, 0, err
	}
	if l.magic == MagicBlank {
		return DispatchRequest{Blank: true, MsgSize: int32(l.size)}, l.size, nil
	}
	be := binary.BigEndian
	req := DispatchRequest{
		Topic:                     string(l.topic),
		QueueID:                   int32(be.Uint32(buf[offQueueID:])),
		CommitLogOffset:           int64(be.Uint64(buf[offPhysicalOffset:])),
		MsgSize:                   int32(l.size),
		StoreTimestamp:            int64(be.Uint64(buf[storeTimestampOffset(l.sysFlag):])),
		ConsumeQueueOffset:        int64(be.Uint64(buf[offQueueOffset:])),
		SysFlag:                   l.sysFlag,
		BornTimestamp:             int64(be.Uint64(buf[offBornTimestamp:])),
		PreparedTransactionOffset: int64(be.Uint64(buf[l.bodyStart-4-8:])),
	}
	if len(l.props) > 0 {
		req.Keys = propertyValue(l.props, PropertyKeys)
		req.UniqKey = propertyValue(l.props, PropertyUniqKey)
		req.TagsCode = tagsHashCodeBytes(propertyBytes(l.props, PropertyTags))
	}
	return req, l.size, nil
}

// PatchQueueOffset writes QUEUEOFFSET into an encoded message (the pull path
// patches a copy with the ConsumeQueue position).
func PatchQueueOffset(msg []byte, queueOffset int64) {
	binary.BigEndian.PutUint64(msg[offQueueOffset:], uint64(queueOffset))
}

// patchStored writes PHYSICALOFFSET and STORETIMESTAMP into an encoded
// message in place and reseals its entry CRC (the CommitLog does it when
// appending).
func patchStored(msg []byte, physicalOffset, storeTimestamp int64) {
	be := binary.BigEndian
	be.PutUint64(msg[offPhysicalOffset:], uint64(physicalOffset))
	sysFlag := int32(be.Uint32(msg[offSysFlag:]))
	be.PutUint64(msg[storeTimestampOffset(sysFlag):], uint64(storeTimestamp))
	sealCRC(msg)
}

// OffsetMsgID returns RocketMQ's offset message id: upper-case hex of store
// IP (4 or 16 bytes), port (int32) and physical offset (int64); 32 hex chars
// for IPv4.
func OffsetMsgID(storeHost netip.AddrPort, physicalOffset int64) string {
	a := storeHost.Addr().Unmap()
	var buf [28]byte
	n := 0
	if a.Is6() {
		ip := a.As16()
		n = copy(buf[:], ip[:])
	} else {
		var ip [4]byte
		if a.Is4() {
			ip = a.As4()
		}
		n = copy(buf[:], ip[:])
	}
	binary.BigEndian.PutUint32(buf[n:], uint32(storeHost.Port()))
	n += 4
	binary.BigEndian.PutUint64(buf[n:], uint64(physicalOffset))
	n += 8
	const digits = "0123456789ABCDEF"
	var out [56]byte
	for i, b := range buf[:n] {
		out[2*i], out[2*i+1] = digits[b>>4], digits[b&0xF]
	}
	return string(out[:2*n])
}

// ParseOffsetMsgID decodes an offset message id (32 or 56 hex chars).
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q is not an offset message id (32 or 56 hex chars)", ErrMessageIllegal, id)
	}
	ipLen := len(b) - 12
	var ip netip.Addr
	if ipLen == 4 {
		ip = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		ip = netip.AddrFrom16([16]byte(b[:16]))
	}
	port := binary.BigEndian.Uint32(b[ipLen:])
	off := int64(binary.BigEndian.Uint64(b[ipLen+4:]))
	return netip.AddrPortFrom(ip, uint16(port)), off, nil
}
