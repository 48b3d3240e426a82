package filter

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// kind is the Java type an evaluated value would have in RocketMQ: the
// evaluator's conversions depend on it (a property compared with an int
// literal is parsed with Integer.valueOf, with a long one Long.valueOf).
type kind uint8

const (
	kNull   kind = iota // Java null: a missing property, NULL, or an unknown result
	kBool               // Boolean
	kInt                // Integer: an integer literal within int32
	kLong               // Long: an integer literal beyond int32
	kDouble             // Double: a float literal
	kString             // String: a string literal or a property value
	kErr                // the evaluator would throw; n holds an errCode, s the text at fault
)

// value is one evaluated operand. Numbers, booleans (0/1) and float bits
// share n so a value stays small and evaluation never allocates.
type value struct {
	k kind
	n int64
	s string
}

var (
	nullV  = value{}
	trueV  = value{k: kBool, n: 1}
	falseV = value{k: kBool}
)

func boolV(b bool) value {
	if b {
		return trueV
	}
	return falseV
}

func doubleV(f float64) value { return value{k: kDouble, n: int64(math.Float64bits(f))} }

func (v value) f() float64 { return math.Float64frombits(uint64(v.n)) }

func (v value) isTrue() bool { return v.k == kBool && v.n != 0 }

func (v value) isFalse() bool { return v.k == kBool && v.n == 0 }

// errCode says which Java exception an evaluation would have thrown.
type errCode int64

const (
	errNotInt     errCode = iota + 1 // Integer.valueOf failed
	errNotLong                       // Long.valueOf failed
	errNotDouble                     // Double.valueOf failed
	errBoolString                    // Boolean compared with a String (ClassCastException)
)

func errV(c errCode, s string) value { return value{k: kErr, n: int64(c), s: s} }

// evalError turns a kErr value into the error Evaluate returns.
func (v value) evalError() error {
	var msg string
	switch errCode(v.n) {
	case errNotInt:
		msg = "cannot compare " + quote(v.s) + " with an int: it is not a valid int"
	case errNotLong:
		msg = "cannot compare " + quote(v.s) + " with a long: it is not a valid long"
	case errNotDouble:
		msg = "cannot compare " + quote(v.s) + " as a number: it is not a valid double"
	default:
		msg = "cannot compare a boolean with the string " + quote(v.s)
	}
	return &EvalError{Msg: msg}
}

// compareJava orders l and r as RocketMQ's ComparisonExpression.__compare
// does with string conversion enabled: operands of different types are
// converted to the left one's type (a string to the number type it is
// compared with, or to a boolean), pairs that cannot be converted order
// as -1, and a failed conversion throws. Neither operand is null.
func compareJava(l, r value) (int, value) {
	if l.k == r.k {
		switch l.k {
		case kBool, kInt, kLong:
			return cmpInt(l.n, r.n), nullV
		case kDouble:
			return cmpDouble(l.f(), r.f()), nullV
		default:
			return strings.Compare(l.s, r.s), nullV
		}
	}
	switch l.k {
	case kBool:
		if r.k == kString {
			return 0, errV(errBoolString, r.s)
		}
	case kInt, kLong:
		switch r.k {
		case kInt, kLong:
			return cmpInt(l.n, r.n), nullV
		case kDouble:
			return cmpDouble(float64(l.n), r.f()), nullV
		case kString:
			n, e := parseJavaInteger(r.s, l.k)
			if e.k == kErr {
				return 0, e
			}
			return cmpInt(l.n, n), nullV
		}
	case kDouble:
		switch r.k {
		case kInt, kLong:
			return cmpDouble(l.f(), float64(r.n)), nullV
		case kString:
			f, ok := parseJavaDouble(r.s)
			if !ok {
				return 0, errV(errNotDouble, r.s)
			}
			return cmpDouble(l.f(), f), nullV
		}
	case kString:
		switch r.k {
		case kBool:
			// Boolean.valueOf: "true" in any case is true, anything else false.
			var b int64
			if strings.EqualFold(l.s, "true") {
				b = 1
			}
			return cmpInt(b, r.n), nullV
		case kInt, kLong:
			n, e := parseJavaInteger(l.s, r.k)
			if e.k == kErr {
				return 0, e
			}
			return cmpInt(n, r.n), nullV
		case kDouble:
			f, ok := parseJavaDouble(l.s)
			if !ok {
				return 0, errV(errNotDouble, l.s)
			}
			return cmpDouble(f, r.f()), nullV
		}
	}
	return -1, nullV
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpDouble is Java's Double.compare: NaN sorts above +Inf and equals
// itself, and -0.0 sorts below 0.0.
func cmpDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := javaDoubleBits(a), javaDoubleBits(b)
	return cmpInt(ab, bb)
}

func javaDoubleBits(f float64) int64 {
	if f != f {
		return 0x7ff8000000000000 // doubleToLongBits' canonical NaN
	}
	return int64(math.Float64bits(f))
}

// parseJavaInteger parses s as Integer.valueOf (k == kInt) or
// Long.valueOf (k == kLong): an optional sign and decimal digits, where a
// digit is any Unicode decimal digit of the Basic Multilingual Plane (Java
// iterates UTF-16 units and asks Character.digit), with no surrounding
// space and no overflow.
func parseJavaInteger(s string, k kind) (int64, value) {
	code := errNotLong
	limit := uint64(math.MaxInt64)
	if k == kInt {
		code = errNotInt
		limit = math.MaxInt32
	}
	i, neg := 0, false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		i = 1
		limit += boolToUint(neg) // the negative range is one larger
	}
	if i == len(s) {
		return 0, errV(code, s)
	}
	var mag uint64
	for i < len(s) {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		d := javaDigit(r)
		if d < 0 || mag > (limit-uint64(d))/10 {
			return 0, errV(code, s)
		}
		mag = mag*10 + uint64(d)
		i += size
	}
	if neg {
		return int64(-mag), nullV // -2^63 wraps to itself, as intended
	}
	return int64(mag), nullV
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// javaDigit is Character.digit(r, 10) for a UTF-16 unit: the value of a
// decimal digit (Unicode category Nd) in the Basic Multilingual Plane, or
// -1. Every Nd range is made of whole runs of ten starting at a zero, so
// the value is the offset into the range modulo ten.
func javaDigit(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < utf8.RuneSelf || r > 0xFFFF || r == utf8.RuneError {
		return -1
	}
	for _, rg := range unicode.Nd.R16 {
		if uint16(r) < rg.Lo {
			return -1
		}
		if uint16(r) <= rg.Hi {
			return int(uint16(r)-rg.Lo) % 10
		}
	}
	return -1
}

// parseJavaDouble parses s as Double.valueOf does: surrounding characters
// up to U+0020 are trimmed; then an optional sign and NaN, Infinity, a
// decimal number with an optional exponent, or a hexadecimal number with a
// binary exponent, either optionally followed by one of f F d D.
func parseJavaDouble(s string) (float64, bool) {
	lo, hi := 0, len(s)
	for lo < hi && s[lo] <= ' ' {
		lo++
	}
	for hi > lo && s[hi-1] <= ' ' {
		hi--
	}
	s = s[lo:hi]
	if s == "" {
		return 0, false
	}
	neg := false
	i := 0
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		i = 1
	}
	rest := s[i:]
	switch rest {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if n := len(rest); n > 0 && strings.IndexByte("fFdD", rest[n-1]) >= 0 {
		rest = rest[:n-1]
	}
	var ok bool
	if len(rest) > 1 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		ok = validHexFloat(rest[2:])
	} else {
		ok = validDecimalFloat(rest)
	}
	if !ok {
		return 0, false
	}
	// The syntax is a subset of what strconv accepts; out-of-range values
	// become ±Inf or 0 as in Java, so the range error is not a failure.
	f, err := strconv.ParseFloat(s[:i]+rest, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// validDecimalFloat checks digits [. digits] [e|E [sign] digits] with at
// least one mantissa digit, ASCII only.
func validDecimalFloat(s string) bool {
	i, digits := scanMantissa(s, isDigit)
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		return validExponent(s[i+1:])
	}
	return i == len(s)
}

// validHexFloat checks the part after 0x: hexdigits [. hexdigits] with at
// least one digit, then a mandatory p|P [sign] decimal digits.
func validHexFloat(s string) bool {
	i, digits := scanMantissa(s, isHexDigit)
	if digits == 0 || i == len(s) || (s[i] != 'p' && s[i] != 'P') {
		return false
	}
	return validExponent(s[i+1:])
}

// scanMantissa reads digits [. digits] from the start of s and returns
// where it stopped and how many digits it read.
func scanMantissa(s string, digit func(byte) bool) (i, digits int) {
	for i < len(s) && digit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && digit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	return i, digits
}

// validExponent checks that s, what follows an exponent letter, is
// [sign] decimal digits, at least one, and nothing else.
func validExponent(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i > start && i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// quote writes s as an SQL92 string literal, doubling single quotes.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// formatValue writes a literal so that it lexes back to the same value and
// Java type: an int or long as decimal digits, a double always with a
// point or an exponent.
func formatValue(v value) string {
	switch v.k {
	case kNull:
		return "NULL"
	case kBool:
		if v.n != 0 {
			return "TRUE"
		}
		return "FALSE"
	case kInt, kLong:
		return strconv.FormatInt(v.n, 10)
	case kDouble:
		s := strconv.FormatFloat(v.f(), 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	default:
		return quote(v.s)
	}
}
