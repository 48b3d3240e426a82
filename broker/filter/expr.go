package filter

import (
	"strings"
)

// Expr is a compiled SQL92 expression. It is immutable and safe for
// concurrent use.
type Expr struct {
	src  string
	root *node
}

// Compile parses a RocketMQ SQL92 expression. The error, a *CompileError
// wrapping ErrSyntax or ErrTooComplex, names the position and what was
// expected there.
func Compile(expr string) (*Expr, error) {
	return compile(expr, defaultLimits)
}

// Result is the three-valued outcome of an expression for one message.
type Result int8

// Results of Evaluate. Only True matches.
const (
	False Result = iota
	True
	// Unknown is SQL's null: the expression depends on a missing property
	// (a = 5 with no property a). NOT Unknown is Unknown.
	Unknown
)

func (r Result) String() string {
	switch r {
	case True:
		return "TRUE"
	case False:
		return "FALSE"
	}
	return "UNKNOWN"
}

// Match reports whether a message with the given properties is selected:
// the expression evaluates to TRUE. props returns a property's value and
// whether the message has it; the reserved property TAGS holds the tag.
// A message for which RocketMQ's evaluator would throw does not match.
func (e *Expr) Match(props func(key string) (string, bool)) bool {
	return e.root.eval(props).isTrue()
}

// MatchMap is Match over a property map.
func (e *Expr) MatchMap(props map[string]string) bool {
	return e.Match(func(k string) (string, bool) {
		v, ok := props[k]
		return v, ok
	})
}

// Evaluate returns the expression's value for a message, or an error
// wrapping ErrEval where RocketMQ's evaluator would throw (such a message
// does not match). It is Match with the reason for tests and logs.
func (e *Expr) Evaluate(props func(key string) (string, bool)) (Result, error) {
	v := e.root.eval(props)
	switch v.k {
	case kErr:
		return False, v.evalError()
	case kNull:
		return Unknown, nil
	case kBool:
		if v.n != 0 {
			return True, nil
		}
		return False, nil
	}
	panic("sql92: condition evaluated to a non-boolean") // the parser only builds conditions at the root
}

// Source returns the text the expression was compiled from.
func (e *Expr) Source() string { return e.src }

// String returns the expression in a canonical form: keywords in upper
// case, comments and redundant parentheses dropped, AND and OR chains
// flattened, and parentheses added where the grammar's precedence would
// surprise a reader ((NOT a) = 5 is how NOT a = 5 parses). Compiling it
// gives an expression that matches exactly the same messages.
func (e *Expr) String() string { return e.root.String() }

// op is a node's operation; each mirrors one RocketMQ expression class.
type op uint8

const (
	opLit        op = iota // ConstantExpression / BooleanConstantExpression
	opProp                 // PropertyExpression
	opCast                 // UnaryExpression BOOLEANCAST: a property used as a condition
	opNeg                  // UnaryExpression NEGATE
	opNot                  // UnaryExpression NOT
	opEq                   // ComparisonExpression ==
	opNe                   // NOT ==
	opIsNull               // == NULL, without the operand checks
	opIsNotNull            // NOT == NULL
	opGt                   // >
	opGe                   // >=
	opLt                   // <
	opLe                   // <=
	opBetween              // >= lo AND <= hi
	opNotBetween           // < lo OR > hi
	opIn                   // UnaryInExpression
	opNotIn                // UnaryInExpression, negated
	opAnd                  // LogicExpression &&, flattened
	opOr                   // LogicExpression ||, flattened
)

// node is one operation of the expression tree.
type node struct {
	op   op
	pos  int     // byte offset of the node's first token, for errors
	val  value   // opLit
	name string  // opProp, opCast, opIn, opNotIn
	a    *node   // unary operand; left operand; BETWEEN's value
	b    *node   // right operand; BETWEEN's low bound
	c    *node   // BETWEEN's high bound
	list []*node // opAnd, opOr: two or more conditions
	set  []string
	idx  map[string]struct{} // set as a map, for long IN lists
}

// isCondition reports whether n is a RocketMQ BooleanExpression: a
// comparison, a logical operation, or the literals TRUE, FALSE and NULL.
func (n *node) isCondition() bool {
	switch n.op {
	case opLit:
		return n.val.k == kBool || n.val.k == kNull
	case opProp, opNeg:
		return false
	}
	return true
}

// index builds the lookup map of a long IN list.
func (n *node) index() {
	if len(n.set) > 8 {
		n.idx = make(map[string]struct{}, len(n.set))
		for _, s := range n.set {
			n.idx[s] = struct{}{}
		}
	}
}

func (n *node) contains(s string) bool {
	if n.idx != nil {
		_, ok := n.idx[s]
		return ok
	}
	for _, x := range n.set {
		if x == s {
			return true
		}
	}
	return false
}

// eval computes n as RocketMQ's Expression.evaluate does: null for a
// missing property propagates, AND and OR are three-valued and
// short-circuit left to right, and a kErr value (a Java exception) aborts
// the whole evaluation.
func (n *node) eval(props func(string) (string, bool)) value {
	switch n.op {
	case opLit:
		return n.val
	case opProp:
		if s, ok := props(n.name); ok {
			return value{k: kString, s: s}
		}
		return nullV
	case opCast:
		if _, ok := props(n.name); ok {
			return falseV // a string is not a Boolean
		}
		return nullV
	case opNeg:
		v := n.a.eval(props)
		switch v.k {
		case kErr:
			return v
		case kInt, kLong:
			v.n = -v.n
			return v
		case kDouble:
			return doubleV(-v.f())
		}
		return nullV // negating a string or boolean yields null
	case opNot:
		return not(n.a.eval(props))
	case opEq:
		return equal(n.a, n.b, props)
	case opNe:
		return not(equal(n.a, n.b, props))
	case opIsNull, opIsNotNull:
		v := n.a.eval(props)
		if v.k == kErr {
			return v
		}
		return boolV((v.k == kNull) == (n.op == opIsNull))
	case opGt, opGe, opLt, opLe:
		return order(n.op, n.a, n.b, props)
	case opBetween:
		l := order(opGe, n.a, n.b, props)
		if l.k == kErr || l.isFalse() {
			return l
		}
		r := order(opLe, n.a, n.c, props)
		if r.k == kErr || r.isFalse() {
			return r
		}
		if l.k == kNull || r.k == kNull {
			return nullV
		}
		return trueV
	case opNotBetween:
		l := order(opLt, n.a, n.b, props)
		if l.k == kErr || l.isTrue() {
			return l
		}
		r := order(opGt, n.a, n.c, props)
		if r.k == kErr || r.isTrue() {
			return r
		}
		if l.k == kNull || r.k == kNull {
			return nullV
		}
		return falseV
	case opIn, opNotIn:
		s, ok := props(n.name)
		if !ok {
			return nullV
		}
		return boolV(n.contains(s) != (n.op == opNotIn))
	case opAnd, opOr:
		// AND stops at the first FALSE, OR at the first TRUE; otherwise
		// any null makes the result null.
		stop := n.op == opOr
		sawNull := false
		for _, c := range n.list {
			v := c.eval(props)
			switch {
			case v.k == kErr:
				return v
			case v.k == kNull:
				sawNull = true
			case (v.n != 0) == stop:
				return v
			}
		}
		if sawNull {
			return nullV
		}
		return boolV(!stop)
	}
	panic("sql92: unknown node")
}

func not(v value) value {
	if v.k == kBool {
		v.n ^= 1
	}
	return v
}

// equal is ComparisonExpression's == : one null operand gives FALSE when
// it is the right one and null when it is the left one; two nulls are
// equal; otherwise the operands are compared with conversions.
func equal(a, b *node, props func(string) (string, bool)) value {
	l := a.eval(props)
	if l.k == kErr {
		return l
	}
	r := b.eval(props)
	if r.k == kErr {
		return r
	}
	switch {
	case l.k == kNull && r.k == kNull:
		return trueV
	case l.k == kNull:
		return nullV
	case r.k == kNull:
		return falseV
	}
	c, e := compareJava(l, r)
	if e.k == kErr {
		return e
	}
	return boolV(c == 0)
}

// order is ComparisonExpression's < <= > >= : null if either side is null
// (the right side is not evaluated when the left is null); two strings are
// both read as doubles; otherwise the operands are compared with
// conversions.
func order(o op, a, b *node, props func(string) (string, bool)) value {
	l := a.eval(props)
	if l.k == kErr || l.k == kNull {
		return l
	}
	r := b.eval(props)
	if r.k == kErr || r.k == kNull {
		return r
	}
	var c int
	if l.k == kString && r.k == kString {
		x, ok := parseJavaDouble(l.s)
		if !ok {
			return errV(errNotDouble, l.s)
		}
		y, ok := parseJavaDouble(r.s)
		if !ok {
			return errV(errNotDouble, r.s)
		}
		c = cmpDouble(x, y)
	} else {
		var e value
		if c, e = compareJava(l, r); e.k == kErr {
			return e
		}
	}
	switch o {
	case opGt:
		return boolV(c > 0)
	case opGe:
		return boolV(c >= 0)
	case opLt:
		return boolV(c < 0)
	}
	return boolV(c <= 0)
}

// Precedence levels of the grammar, loosest first.
const (
	levelOr = iota + 1
	levelAnd
	levelEquality
	levelComparison
	levelUnary
	levelPrimary
)

func (n *node) level() int {
	switch n.op {
	case opLit, opProp, opCast:
		return levelPrimary
	case opNeg, opNot:
		return levelUnary
	case opEq, opNe, opIsNull, opIsNotNull:
		return levelEquality
	case opAnd:
		return levelAnd
	case opOr:
		return levelOr
	}
	return levelComparison
}

var relText = [...]string{opGt: " > ", opGe: " >= ", opLt: " < ", opLe: " <= "}

func (n *node) String() string {
	var b strings.Builder
	n.write(&b, levelOr, false)
	return b.String()
}

// write prints n, in parentheses when its level is looser than min. A NOT
// that is an operand of a comparison is parenthesized although the grammar
// does not need it, because NOT a = 5 reads as NOT (a = 5) but is not.
func (n *node) write(b *strings.Builder, min int, operand bool) {
	if n.level() < min || operand && n.op == opNot {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch n.op {
	case opLit:
		b.WriteString(formatValue(n.val))
	case opProp, opCast:
		b.WriteString(n.name)
	case opNeg:
		b.WriteByte('-')
		if n.a.op == opNeg {
			b.WriteByte(' ') // "--" could start a comment
		}
		n.a.write(b, levelUnary, true)
	case opNot:
		b.WriteString("NOT ")
		n.a.write(b, levelUnary, false)
	case opEq, opNe:
		n.a.write(b, levelEquality, true)
		if n.op == opEq {
			b.WriteString(" = ")
		} else {
			b.WriteString(" <> ")
		}
		n.b.write(b, levelComparison, true)
	case opIsNull, opIsNotNull:
		n.a.write(b, levelEquality, true)
		if n.op == opIsNull {
			b.WriteString(" IS NULL")
		} else {
			b.WriteString(" IS NOT NULL")
		}
	case opGt, opGe, opLt, opLe:
		n.a.write(b, levelComparison, true)
		b.WriteString(relText[n.op])
		n.b.write(b, levelUnary, true)
	case opBetween, opNotBetween:
		n.a.write(b, levelComparison, true)
		if n.op == opNotBetween {
			b.WriteString(" NOT")
		}
		b.WriteString(" BETWEEN ")
		n.b.write(b, levelUnary, true)
		b.WriteString(" AND ")
		n.c.write(b, levelUnary, true)
	case opIn, opNotIn:
		b.WriteString(n.name)
		if n.op == opNotIn {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN (")
		for i, s := range n.set {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(s))
		}
		b.WriteByte(')')
	case opAnd, opOr:
		sep, min := " AND ", levelEquality
		if n.op == opOr {
			sep, min = " OR ", levelAnd
		}
		for i, c := range n.list {
			if i > 0 {
				b.WriteString(sep)
			}
			c.write(b, min, false)
		}
	}
}
