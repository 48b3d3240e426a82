package filter

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on what Compile accepts. Parsing recurses once per nesting level
// and evaluation once per operator, so both bound the stack and the time a
// subscription can cost the broker.
const (
	// MaxExprLen is the longest expression accepted, in bytes.
	MaxExprLen = 8 << 10
	// MaxDepth is the deepest nesting accepted: every parenthesis and
	// every prefix operator (NOT, -, +) opens a level.
	MaxDepth = 100
)

// bailout carries a compile error up the recursive descent; Compile
// recovers it. Any other panic is a bug and propagates.
type bailout struct{ err *CompileError }

// fail stops compilation with an error at byte offset pos of src.
func fail(src string, pos int, kind error, msg string) {
	panic(bailout{&CompileError{Pos: utf8.RuneCountInString(src[:pos]) + 1, Msg: msg, err: kind}})
}

type limits struct {
	maxLen, maxDepth int
}

var defaultLimits = limits{maxLen: MaxExprLen, maxDepth: MaxDepth}

// parser is a recursive descent over RocketMQ's SelectorParser.jj grammar,
// building nodes through the same checks as RocketMQ's expression
// factories (ComparisonExpression.create*, asBooleanExpression).
type parser struct {
	lx     lexer
	ahead  [2]token
	nAhead int
	depth  int
	lim    limits
}

func compile(src string, lim limits) (e *Expr, err error) {
	if len(src) > lim.maxLen {
		return nil, &CompileError{Msg: "expression is " + strconv.Itoa(len(src)) +
			" bytes; the limit is " + strconv.Itoa(lim.maxLen), err: ErrTooComplex}
	}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			e, err = nil, b.err
		}
	}()
	p := &parser{lx: lexer{src: src}, lim: lim}
	if t := p.peek(0); t.kind == tEOF {
		p.failAt(t, "empty expression: write a condition such as a > 5, or TRUE to select every message")
	}
	root := p.asCondition(p.or())
	if t := p.peek(0); t.kind != tEOF {
		p.trailing(t)
	}
	return &Expr{src: src, root: root}, nil
}

// trailing rejects input after a complete expression. RocketMQ's parser
// stops at the first token that cannot continue the expression and
// ignores the rest, so "a = 1 b = 2" silently means "a = 1"; here it is an
// error. A trailing "--" comment without a line break is the one
// exception: RocketMQ ignores it as well, and it reads as a comment.
func (p *parser) trailing(t token) {
	if t.kind == tMinus && len(p.lx.src) > t.pos+1 && p.lx.src[t.pos+1] == '-' {
		return
	}
	msg := "unexpected " + t.describe() + " after a complete condition"
	switch {
	case t.kind == tIdent && (t.text[0] == 'x' || t.text[0] == 'X') && t.pos > 0 && p.lx.src[t.pos-1] == '0':
		msg += "; hexadecimal numbers are not supported"
	case t.kind == tIdent && unsupported(t.text) != "":
		msg += "; " + unsupported(t.text)
	case t.kind == tRParen:
		msg += "; no '(' is open"
	case startsValue(t.kind) && t.kind != tPlus && t.kind != tMinus:
		msg += "; join conditions with AND or OR"
	}
	p.failAt(t, msg)
}

// unsupported explains an operator other SQL dialects have and RocketMQ
// 4.9 does not (CONTAINS, STARTSWITH, ENDSWITH came in RocketMQ 5).
func unsupported(word string) string {
	switch w := strings.ToUpper(word); w {
	case "LIKE", "CONTAINS", "STARTSWITH", "ENDSWITH":
		return w + " is not part of RocketMQ 4.9's SQL92 filter; compare whole values with = or IN"
	}
	return ""
}

func (p *parser) failAt(t token, msg string) { fail(p.lx.src, t.pos, ErrSyntax, msg) }

func (p *parser) peek(i int) token {
	for p.nAhead <= i {
		p.ahead[p.nAhead] = p.lx.next()
		p.nAhead++
	}
	return p.ahead[i]
}

func (p *parser) advance() token {
	t := p.peek(0)
	p.ahead[0] = p.ahead[1]
	p.nAhead--
	return t
}

func (p *parser) expect(k tokKind, what string) token {
	t := p.peek(0)
	if t.kind != k {
		p.failAt(t, "expected "+what+", found "+t.describe())
	}
	return p.advance()
}

func (p *parser) enter(t token) {
	p.depth++
	if p.depth > p.lim.maxDepth {
		fail(p.lx.src, t.pos, ErrTooComplex, "nesting deeper than "+strconv.Itoa(p.lim.maxDepth)+" levels")
	}
}

// or: and (OR and)*
func (p *parser) or() *node {
	left := p.and()
	for p.peek(0).kind == tOr {
		p.needOperand(p.advance())
		right := p.and()
		left = logic(opOr, p.asCondition(left), p.asCondition(right))
	}
	return left
}

// and: equality (AND equality)*
func (p *parser) and() *node {
	left := p.equality()
	for p.peek(0).kind == tAnd {
		p.needOperand(p.advance())
		right := p.equality()
		left = logic(opAnd, p.asCondition(left), p.asCondition(right))
	}
	return left
}

// needOperand fails unless a value follows the operator t.
func (p *parser) needOperand(t token) {
	if n := p.peek(0); !startsValue(n.kind) {
		p.failAt(n, "expected a condition after "+t.describe()+", found "+n.describe())
	}
}

// logic joins two conditions, flattening chains of the same operator:
// AND and OR are associative under RocketMQ's three-valued,
// left-to-right, short-circuit evaluation, errors included.
func logic(o op, l, r *node) *node {
	n := l
	if l.op != o {
		n = &node{op: o, pos: l.pos, list: []*node{l}}
	}
	if r.op == o {
		n.list = append(n.list, r.list...)
	} else {
		n.list = append(n.list, r)
	}
	return n
}

// equality: comparison ( = comparison | <> comparison | IS NULL | IS NOT NULL )*
func (p *parser) equality() *node {
	left := p.comparison()
	for {
		t := p.peek(0)
		switch t.kind {
		case tEq, tNe:
			p.advance()
			right := p.operand(t)
			p.checkEqualOperand(t, left)
			p.checkEqualOperand(t, right)
			if left.op == opLit && right.op == opLit && left.val.k == kBool && right.val.k != kBool {
				p.failAt(t, "cannot compare "+left.String()+" with "+right.String())
			}
			o := opEq
			if t.kind == tNe {
				o = opNe
			}
			left = &node{op: o, pos: left.pos, a: left, b: right}
		case tIs:
			p.advance()
			o := opIsNull
			if p.peek(0).kind == tNot {
				p.advance()
				o = opIsNotNull
			}
			p.expect(tNull, "NULL after IS / IS NOT")
			left = &node{op: o, pos: left.pos, a: left}
		default:
			return left
		}
	}
}

// operand parses the right side of a binary operator t, naming t when the
// side is missing.
func (p *parser) operand(t token) *node {
	if !startsValue(p.peek(0).kind) {
		p.failAt(p.peek(0), "expected a value after '"+t.text+"', found "+p.peek(0).describe())
	}
	if t.kind == tEq || t.kind == tNe {
		return p.comparison()
	}
	return p.unary()
}

func startsValue(k tokKind) bool {
	switch k {
	case tIdent, tInt, tFloat, tString, tTrue, tFalse, tNull, tNot, tLParen, tPlus, tMinus:
		return true
	}
	return false
}

// checkEqualOperand is ComparisonExpression.checkEqualOperand.
func (p *parser) checkEqualOperand(t token, n *node) {
	if n.op == opLit && n.val.k == kNull {
		p.failAt(t, "NULL cannot be compared with '"+t.text+"'; use IS NULL or IS NOT NULL")
	}
}

// comparison: unary ( > unary | >= unary | < unary | <= unary
//
//	| [NOT] BETWEEN unary AND unary | [NOT] IN (string, ...) )*
func (p *parser) comparison() *node {
	left := p.unary()
	for {
		t := p.peek(0)
		not := false
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.advance()
			right := p.operand(t)
			p.checkOrdered(t, left)
			p.checkOrdered(t, right)
			left = &node{op: relOps[t.kind], pos: left.pos, a: left, b: right}
			continue
		case tNot:
			switch p.peek(1).kind {
			case tBetween, tIn:
			default:
				n := p.peek(1)
				msg := "expected BETWEEN or IN after NOT, found " + n.describe()
				if n.kind == tIdent && unsupported(n.text) != "" {
					msg += "; " + unsupported(n.text)
				}
				p.failAt(n, msg)
			}
			p.advance()
			not = true
			t = p.peek(0)
		case tBetween, tIn:
		default:
			return left
		}
		p.advance()
		if t.kind == tBetween {
			left = p.between(t, left, not)
		} else {
			left = p.in(t, left, not)
		}
	}
}

var relOps = map[tokKind]op{tGt: opGt, tGe: opGe, tLt: opLt, tLe: opLe}

// checkOrdered is ComparisonExpression.checkLessThanOperand: only numbers
// and values unknown until evaluation (properties, negations) can be
// ordered.
func (p *parser) checkOrdered(t token, n *node) {
	what := ""
	switch {
	case n.op == opLit && n.val.k == kString:
		what = "a string"
	case n.op == opLit && (n.val.k == kBool || n.val.k == kNull):
		what = n.String()
	case n.op == opNot:
		p.failAt(t, "NOT binds tighter than "+t.describe()+", so this compares the condition "+n.String()+"; write NOT (...) around the comparison")
	case n.isCondition():
		what = "a condition"
	default:
		return
	}
	p.failAt(t, what+" cannot be compared with "+t.describe()+"; only numbers and properties can (compare strings with = or IN)")
}

func (p *parser) between(t token, v *node, not bool) *node {
	lo := p.operand(t)
	p.expect(tAnd, "AND between the BETWEEN bounds")
	hi := p.unary()
	for _, n := range [...]*node{v, lo, hi} {
		p.checkOrdered(t, n)
	}
	// ComparisonExpression.createBetween (but not createNotBetween) rejects
	// literal bounds out of order; computed bounds are not checked.
	if !not && lo.op == opLit && hi.op == opLit {
		if c, _ := compareJava(hi.val, lo.val); c < 0 {
			p.failAt(t, "BETWEEN bounds out of order: "+lo.String()+" is greater than "+hi.String())
		}
	}
	o := opBetween
	if not {
		o = opNotBetween
	}
	return &node{op: o, pos: v.pos, a: v, b: lo, c: hi}
}

func (p *parser) in(t token, v *node, not bool) *node {
	if v.op != opProp {
		p.failAt(t, "IN needs a property on its left, found "+v.String())
	}
	p.expect(tLParen, "'(' after IN")
	n := &node{op: opIn, pos: v.pos, name: v.name}
	if not {
		n.op = opNotIn
	}
	for {
		s := p.peek(0)
		if s.kind != tString {
			msg := "expected a string in the IN list, found " + s.describe()
			if s.kind == tInt || s.kind == tFloat {
				msg += " (IN compares strings only; quote it: '" + s.text + "')"
			}
			p.failAt(s, msg)
		}
		p.advance()
		n.set = append(n.set, s.val.s)
		if p.peek(0).kind != tComma {
			break
		}
		p.advance()
	}
	p.expect(tRParen, "',' or ')' in the IN list")
	n.index()
	return n
}

// unary: + unary | - unary | NOT unary | primary
func (p *parser) unary() *node {
	t := p.peek(0)
	switch t.kind {
	case tPlus, tMinus, tNot:
		p.advance()
		p.enter(t)
		if !startsValue(p.peek(0).kind) {
			p.failAt(p.peek(0), "expected a value after "+t.describe()+", found "+p.peek(0).describe())
		}
		x := p.unary()
		p.depth--
		switch t.kind {
		case tPlus:
			return x
		case tMinus:
			return &node{op: opNeg, pos: t.pos, a: x}
		}
		return &node{op: opNot, pos: t.pos, a: p.asCondition(x)}
	}
	return p.primary()
}

// primary: literal | property | ( or )
func (p *parser) primary() *node {
	t := p.advance()
	switch t.kind {
	case tInt, tFloat, tString:
		if t.bad != "" {
			p.failAt(t, t.bad)
		}
		return &node{op: opLit, pos: t.pos, val: t.val}
	case tTrue:
		return &node{op: opLit, pos: t.pos, val: trueV}
	case tFalse:
		return &node{op: opLit, pos: t.pos, val: falseV}
	case tNull:
		return &node{op: opLit, pos: t.pos, val: nullV}
	case tIdent:
		return &node{op: opProp, pos: t.pos, name: t.text}
	case tLParen:
		p.enter(t)
		x := p.or()
		p.expect(tRParen, "')' to close the '(' at "+strconv.Itoa(utf8.RuneCountInString(p.lx.src[:t.pos])+1))
		p.depth--
		return x
	}
	p.failAt(t, "expected a value, found "+t.describe())
	return nil
}

// asCondition is SelectorParser.asBooleanExpression: a condition stays, a
// property is read as a boolean (true only for a Boolean value, so a
// message property, always a string, reads as false when set), and
// anything else is not a condition.
func (p *parser) asCondition(n *node) *node {
	if n.isCondition() {
		return n
	}
	if n.op == opProp {
		return &node{op: opCast, pos: n.pos, name: n.name}
	}
	fail(p.lx.src, n.pos, ErrSyntax, "expected a condition, found "+describeNode(n)+" (compare it: a = 5, a IS NOT NULL)")
	return nil
}

func describeNode(n *node) string {
	s := n.String()
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	switch {
	case n.op == opLit && n.val.k == kString:
		return "string " + s
	case n.op == opLit:
		return "number " + s
	}
	return s
}
