package filter

import (
	"strconv"
	"strings"
)

// tokKind is a token of RocketMQ's SelectorParser.jj.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tInt    // DECIMAL_LITERAL
	tFloat  // FLOATING_POINT_LITERAL
	tString // STRING_LITERAL
	// Reserved words, matched in any case.
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	// Punctuation.
	tEq     // =
	tNe     // <>
	tGt     // >
	tGe     // >=
	tLt     // <
	tLe     // <=
	tLParen // (
	tRParen // )
	tComma  // ,
	tPlus   // +
	tMinus  // -
)

var keywords = map[string]tokKind{
	"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "IN": tIn,
	"TRUE": tTrue, "FALSE": tFalse, "NULL": tNull, "IS": tIs,
}

var punct = [...]string{tEq: "=", tNe: "<>", tGt: ">", tGe: ">=", tLt: "<", tLe: "<=",
	tLParen: "(", tRParen: ")", tComma: ",", tPlus: "+", tMinus: "-"}

type token struct {
	kind tokKind
	pos  int    // byte offset in the source
	text string // the source text of the token
	val  value  // literals: the decoded value
	// bad says why a well-formed number literal has no value (out of
	// range). Like RocketMQ, which converts a literal only when the
	// grammar uses it, the parser reports it only if it reaches the token.
	bad string
}

// describe names a token for an error message.
func (t token) describe() string {
	switch {
	case t.kind == tEOF:
		return "end of expression"
	case t.kind == tIdent:
		return "property " + t.text
	case t.kind == tInt || t.kind == tFloat:
		return "number " + t.text
	case t.kind == tString:
		return "string " + t.text
	case t.kind >= tNot && t.kind <= tIs:
		return strings.ToUpper(t.text)
	}
	return "'" + t.text + "'"
}

// lexer splits an expression into tokens on demand, with JavaCC's rule of
// the longest match: "5.e3" is one float, "05" is the integer 0 followed
// by 5, "1.5.5" is 1.5 followed by .5.
type lexer struct {
	src string
	pos int
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

// skip passes white space and comments. A "--" comment runs to a line
// break and needs one: without a line break ahead, "--" is two minus
// signs, as in RocketMQ's token manager.
func (lx *lexer) skip() {
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			lx.pos++
		case strings.HasPrefix(lx.src[lx.pos:], "--"):
			end := strings.IndexAny(lx.src[lx.pos:], "\n\r")
			if end < 0 {
				return
			}
			lx.pos += end + 1
			if lx.src[lx.pos-1] == '\r' && lx.pos < len(lx.src) && lx.src[lx.pos] == '\n' {
				lx.pos++
			}
		case strings.HasPrefix(lx.src[lx.pos:], "/*"):
			end := strings.Index(lx.src[lx.pos+2:], "*/")
			if end < 0 {
				fail(lx.src, lx.pos, ErrSyntax, "unterminated comment: '/*' needs a closing '*/'")
			}
			lx.pos += 2 + end + 2
		default:
			return
		}
	}
}

// next returns the next token or fails with a lexical error.
func (lx *lexer) next() token {
	lx.skip()
	start := lx.pos
	if start == len(lx.src) {
		return token{kind: tEOF, pos: start}
	}
	c := lx.src[start]
	switch {
	case isIdentStart(c):
		end := start + 1
		for end < len(lx.src) && isIdentPart(lx.src[end]) {
			end++
		}
		lx.pos = end
		text := lx.src[start:end]
		if len(text) <= len("BETWEEN") {
			if k, ok := keywords[strings.ToUpper(text)]; ok {
				return token{kind: k, pos: start, text: text}
			}
		}
		return token{kind: tIdent, pos: start, text: text}
	case isDigit(c) || c == '.' && start+1 < len(lx.src) && isDigit(lx.src[start+1]):
		return lx.number()
	case c == '\'':
		return lx.str()
	}
	kind := tEOF
	switch c {
	case '=':
		kind = tEq
	case '<':
		kind = tLt
		if start+1 < len(lx.src) {
			switch lx.src[start+1] {
			case '>':
				kind = tNe
			case '=':
				kind = tLe
			}
		}
	case '>':
		kind = tGt
		if start+1 < len(lx.src) && lx.src[start+1] == '=' {
			kind = tGe
		}
	case '(':
		kind = tLParen
	case ')':
		kind = tRParen
	case ',':
		kind = tComma
	case '+':
		kind = tPlus
	case '-':
		kind = tMinus
	}
	if kind == tEOF {
		fail(lx.src, start, ErrSyntax, unexpectedChar(lx.src[start:]))
	}
	lx.pos = start + len(punct[kind])
	return token{kind: kind, pos: start, text: punct[kind]}
}

func unexpectedChar(rest string) string {
	r := []rune(rest[:min(len(rest), 4)])[0]
	msg := "unexpected character " + strconv.QuoteRune(r)
	switch {
	case strings.HasPrefix(rest, "!="):
		msg += "; not equal is written <>"
	case strings.HasPrefix(rest, "&&") || strings.HasPrefix(rest, "||"):
		msg += "; use AND / OR"
	case r == '"':
		msg += "; strings are written in single quotes"
	}
	return msg
}

// number scans DECIMAL_LITERAL ("0" or [1-9][0-9]* with an optional l/L)
// or FLOATING_POINT_LITERAL (digits with a point and/or an exponent),
// whichever match is longer.
func (lx *lexer) number() token {
	src, start := lx.src, lx.pos
	i := start
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	intDigits := i - start
	isFloat := false
	if i < len(src) && src[i] == '.' {
		isFloat = true
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if intDigits > 0 || isFloat {
		if j := exponentEnd(src, i); j > i {
			isFloat, i = true, j
		}
	}
	if isFloat {
		lx.pos = i
		t := token{kind: tFloat, pos: start, text: src[start:i]}
		// The text is digits with a point or an exponent: only its range
		// can be wrong. RocketMQ's ConstantExpression.createFloat rejects
		// anything above Double.MAX_VALUE and below Double.MIN_VALUE, the
		// smallest positive double: so 0.0 too.
		f, _ := strconv.ParseFloat(t.text, 64)
		switch {
		case f > maxDouble:
			t.bad = "number " + t.text + " is larger than the largest double"
		case f == 0:
			t.bad = "float " + t.text + " is zero or below the smallest positive double, which RocketMQ rejects; write 0"
		}
		t.val = doubleV(f)
		return t
	}
	if src[start] == '0' {
		i = start + 1
	} else if i < len(src) && (src[i] == 'l' || src[i] == 'L') {
		i++
	}
	lx.pos = i
	t := token{kind: tInt, pos: start, text: src[start:i]}
	n, err := strconv.ParseInt(strings.TrimRight(t.text, "lL"), 10, 64)
	if err != nil {
		t.bad = "integer " + t.text + " is out of range: the largest is 9223372036854775807"
	}
	t.val = value{k: kLong, n: n}
	if n <= 1<<31-1 {
		t.val.k = kInt // createFromDecimal keeps an Integer when the value fits
	}
	return t
}

const maxDouble = 1.7976931348623157e308

// exponentEnd returns the end of an exponent (e|E [+|-] digits) at i, or i.
func exponentEnd(src string, i int) int {
	if i >= len(src) || (src[i] != 'e' && src[i] != 'E') {
		return i
	}
	j := i + 1
	if j < len(src) && (src[j] == '+' || src[j] == '-') {
		j++
	}
	k := j
	for k < len(src) && isDigit(src[k]) {
		k++
	}
	if k == j {
		return i
	}
	return k
}

// str scans a single-quoted string; ” inside stands for one quote. As in
// JavaCC, an unterminated string that contains a quote ends at the last
// quote that could close it: 'a”b lexes as 'a' followed by 'b.
func (lx *lexer) str() token {
	src, start := lx.src, lx.pos
	var b strings.Builder
	i := start + 1
	lastEnd, lastLen := -1, 0
	for {
		j := strings.IndexByte(src[i:], '\'')
		if j < 0 {
			if lastEnd < 0 {
				fail(src, start, ErrSyntax, "unterminated string: a string ends with ' (a quote inside is written '')")
			}
			i = lastEnd
			s := b.String()[:lastLen]
			lx.pos = i
			return token{kind: tString, pos: start, text: src[start:i], val: value{k: kString, s: s}}
		}
		b.WriteString(src[i : i+j])
		i += j + 1
		if i < len(src) && src[i] == '\'' {
			lastEnd, lastLen = i, b.Len()
			b.WriteByte('\'')
			i++
			continue
		}
		break
	}
	lx.pos = i
	return token{kind: tString, pos: start, text: src[start:i], val: value{k: kString, s: b.String()}}
}
